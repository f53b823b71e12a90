package payload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Schema is a compiled JSON Schema. It is immutable and safe for concurrent
// use.
type Schema struct {
	raw      json.RawMessage
	compiled *jsonschema.Schema
}

// resourceURL names the schema being compiled: loc is only for messages,
// and a relative $ref must resolve inside the document.
const resourceURL = "switchboard:///schema.json"

// Compile compiles a JSON Schema given as JSON text. A schema without
// "$schema" is read as draft 2020-12. The schema must describe a JSON
// object or be a boolean schema. Errors wrap [ErrInvalidSchema].
func Compile(raw []byte) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: not JSON: %v", ErrInvalidSchema, err)
	}
	switch doc.(type) {
	case map[string]any, bool:
	default:
		return nil, fmt.Errorf("%w: a schema is a JSON object (or true/false), not %s", ErrInvalidSchema, kindOf(doc))
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	if err := c.AddResource(resourceURL, doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	s, err := c.Compile(resourceURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidSchema, strings.ReplaceAll(err.Error(), resourceURL, "the schema"))
	}
	compact := &bytes.Buffer{}
	if err := json.Compact(compact, raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	return &Schema{raw: compact.Bytes(), compiled: s}, nil
}

// JSON returns the schema's JSON text as written (compacted). The caller must
// not modify it.
func (s *Schema) JSON() json.RawMessage { return s.raw }

// MarshalJSON writes the schema as written.
func (s *Schema) MarshalJSON() ([]byte, error) { return s.raw, nil }

// Validate checks a JSON document (an intent's payload, or an answer)
// against the schema. It returns nil or an *[Error] naming the first
// failing value. Empty input is checked as JSON null. An object that names
// a member twice fails, wherever it is (duplicateName).
func (s *Schema) Validate(doc []byte) error {
	if len(bytes.TrimSpace(doc)) == 0 {
		doc = []byte("null")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return &Error{Reason: "not JSON: " + err.Error()}
	}
	if path, name, dup := duplicateName(doc); dup {
		return &Error{Path: path, Reason: fmt.Sprintf("the name %q appears twice in one object: JSON readers disagree on which value counts, so a payload checked against a schema must name each member once", name)}
	}
	return s.ValidateValue(v)
}

// ValidateValue is Validate on a decoded JSON value (as encoding/json
// decodes into any, numbers as float64 or json.Number).
func (s *Schema) ValidateValue(v any) error {
	err := s.compiled.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &Error{Reason: err.Error()}
	}
	return firstLeaf(ve)
}

// firstLeaf picks, of the errors the validator reports, the most precise
// one: the deepest instance location, then the first in the schema's
// order. Group errors ("validation failed" of a $ref, allOf, ...) are
// skipped for their causes.
func firstLeaf(ve *jsonschema.ValidationError) *Error {
	var best *jsonschema.ValidationError
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			if best == nil || len(e.InstanceLocation) > len(best.InstanceLocation) {
				best = e
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return &Error{Path: pointer(best.InstanceLocation), Reason: best.ErrorKind.LocalizedString(printer)}
}

var printer = message.NewPrinter(language.English)

// pointer writes tokens as a JSON Pointer (RFC 6901): "" for the root.
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// refuseLoader loads nothing: a schema is self-contained (the draft
// meta-schemas are built into the validator and never loaded).
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("$ref %q: a schema may only refer inside itself (#/$defs/...); external documents are not loaded", url)
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case []any:
		return "an array"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}
