package payload

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// hasDuplicate is duplicateName's reference: encoding/json's token stream,
// a set of names per open object.
func hasDuplicate(doc []byte) bool {
	d := json.NewDecoder(bytes.NewReader(doc))
	type frame struct {
		object bool
		names  map[string]bool
		key    bool // an object's next string is a name
	}
	var stack []*frame
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return false
		}
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			if delim, ok := tok.(json.Delim); ok && delim == '}' {
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].key = true
				}
				continue
			}
			name := tok.(string)
			if top.names[name] {
				return true
			}
			top.names[name] = true
			top.key = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, names: map[string]bool{}, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].key = true
		}
	}
}

// duplicateName agrees with encoding/json on every document the validator
// decodes, and never panics on one.
func FuzzDuplicateName(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"a":{"b":1,"b":2}}`, `[{"a":1},{"a":1}]`, `{"a":"\"}","b":[1,{"a":1}]}`,
		`{"\u0061":1,"a":2}`, "{\"\xff\":1,\"\xfe\":2}", ` { } `, `"x"`, `[1, 2.5e3, true, null]`, `{"a":[],"b":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if _, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc)); err != nil {
			return
		}
		_, _, got := duplicateName(doc)
		if want := hasDuplicate(doc); got != want {
			t.Fatalf("%q: duplicate %v, encoding/json's tokens say %v", doc, got, want)
		}
	})
}
