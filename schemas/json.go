package schemas

import (
	"encoding/json"
	"errors"
)

// JSON is the text of one JSON document: a payload or an answer. In Avro
// records it travels as a string holding that text; in JSON records it is
// embedded as the JSON value itself ("payload": {"amount": 12}), so people who
// write records by hand write natural JSON.
//
// The zero value is an absent document and marshals as null.
type JSON string

// MarshalJSON emits the document as is. It is not validated again here: the
// codec validates JSON text when it decodes it.
func (j JSON) MarshalJSON() ([]byte, error) {
	if j == "" {
		return []byte("null"), nil
	}
	return []byte(j), nil
}

// UnmarshalJSON keeps the raw text of the document.
func (j *JSON) UnmarshalJSON(b []byte) error {
	if j == nil {
		return errors.New("schemas: UnmarshalJSON on nil *JSON")
	}
	if string(b) == "null" {
		*j = ""
		return nil
	}
	*j = JSON(b)
	return nil
}

// Valid reports whether j holds a well-formed JSON document.
func (j JSON) Valid() bool { return j != "" && json.Valid([]byte(j)) }
