package payload_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/intents/payload"
)

const order = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "$defs": {"line": {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}}, "required": ["sku", "qty"]}},
  "properties": {"amount": {"type": "number"}, "lines": {"type": "array", "items": {"$ref": "#/$defs/line"}}},
  "required": ["amount"],
  "additionalProperties": false
}`

func TestValidateNamesTheFailingPath(t *testing.T) {
	s, err := payload.Compile([]byte(order))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		doc, path, reason string
	}{
		{`{"amount": 12, "lines": [{"sku": "a", "qty": 1}]}`, "", ""},
		{`{"amount": "12"}`, "/amount", "number"},
		{`{"amount": 1, "lines": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 0}]}`, "/lines/1/qty", "minimum"},
		{`{"amount": 1, "lines": [{"qty": 2}]}`, "/lines/0", "sku"},
		{`{}`, "", "amount"},
		{`{"amount": 1, "extra": true}`, "", "extra"},
		{`[1]`, "", "object"},
		{`{"amount": `, "", "not JSON"},
	} {
		err := s.Validate([]byte(tc.doc))
		if tc.reason == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.doc, err)
			}
			continue
		}
		var pe *payload.Error
		if !errors.As(err, &pe) || !errors.Is(err, payload.ErrInvalidPayload) {
			t.Errorf("%s: error %v (%T), want a *payload.Error", tc.doc, err, err)
			continue
		}
		if pe.Path != tc.path || !strings.Contains(pe.Reason, tc.reason) {
			t.Errorf("%s: path %q reason %q, want path %q and a reason naming %q", tc.doc, pe.Path, pe.Reason, tc.path, tc.reason)
		}
	}
}

func TestCompileKeepsTheSchemaAsWritten(t *testing.T) {
	s, err := payload.Compile([]byte(order))
	if err != nil {
		t.Fatal(err)
	}
	got := string(s.JSON())
	for _, want := range []string{`"$schema":"https://json-schema.org/draft/2020-12/schema"`, `"$defs":{"line"`, `"additionalProperties":false`} {
		if !strings.Contains(got, want) {
			t.Errorf("JSON() = %s, lacks %s", got, want)
		}
	}
}

func TestCompileRefusesBadSchemas(t *testing.T) {
	for _, tc := range []struct{ name, schema, want string }{
		{"not json", `{"type": `, "not JSON"},
		{"not an object", `"object"`, "a string"},
		{"bad keyword value", `{"type": "objet"}`, "type"},
		{"bad pattern", `{"type": "string", "pattern": "("}`, "pattern"},
		{"external ref", `{"$ref": "https://example.com/s.json"}`, "refer inside itself"},
		{"file ref", `{"$ref": "file:///etc/passwd"}`, "refer inside itself"},
	} {
		_, err := payload.Compile([]byte(tc.schema))
		if !errors.Is(err, payload.ErrInvalidSchema) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalidSchema mentioning %q", tc.name, err, tc.want)
		}
	}
}

func TestBooleanSchemas(t *testing.T) {
	yes, err := payload.Compile([]byte(`true`))
	if err != nil {
		t.Fatal(err)
	}
	if err := yes.Validate([]byte(`[1,2]`)); err != nil {
		t.Errorf("true accepts anything: %v", err)
	}
	no, err := payload.Compile([]byte(`false`))
	if err != nil {
		t.Fatal(err)
	}
	if err := no.Validate([]byte(`{}`)); err == nil {
		t.Error("false accepts nothing, got nil")
	}
}

func ExampleSchema_Validate() {
	s, _ := payload.Compile([]byte(`{"type":"object","properties":{"amount":{"type":"number","minimum":0}},"required":["amount"]}`))
	fmt.Println(s.Validate([]byte(`{"amount": -3}`)))
	// Output: at /amount: minimum: got -3, want 0
}

// A payload that names a member twice fails, wherever the object is: one
// reader would check the last value against the schema and another act on
// the first.
func TestValidateRefusesADuplicateName(t *testing.T) {
	s, err := payload.Compile([]byte(order))
	if err != nil {
		t.Fatal(err)
	}
	many := func(dup bool) string {
		var b strings.Builder
		b.WriteString(`{"amount": 1, "lines": [{"sku": "a", "qty": 1`)
		for i := range 40 {
			fmt.Fprintf(&b, `, "k%d": %d`, i, i)
		}
		if dup {
			b.WriteString(`, "k17": 0`)
		}
		b.WriteString(`}]}`)
		return b.String()
	}
	for _, tc := range []struct {
		doc, path, name string
	}{
		{`{"amount": -5, "amount": 5}`, "", "amount"},
		{`{"amount": 5, "amount": "five"}`, "", "amount"},
		{`{"amount": 1, "lines": [{"sku": "a", "qty": 1}, {"qty": 1, "sku": "b", "qty": 0}]}`, "/lines/1", "qty"},
		{`{"amount": 1, "\u0061mount": 2}`, "", "amount"}, // equal once unescaped
		{"{\"amount\": 1, \"lines\": [{\"sku\": \"a\", \"qty\": 1, \"x\\\"}\": 1, \"x\\\"}\": 2}]}", "/lines/0", `x"}`},
		{many(true), "/lines/0", "k17"}, // past the first 16 names
		// The same name in different objects, and in strings, is fine.
		{`{"amount": 1, "lines": [{"sku": "amount", "qty": 1}, {"sku": "{\"qty\":1,\"qty\":2}", "qty": 2}]}`, "", ""},
		{many(false), "", ""},
	} {
		err := s.Validate([]byte(tc.doc))
		var pe *payload.Error
		if tc.name == "" {
			if errors.As(err, &pe) && strings.Contains(pe.Reason, "twice") {
				t.Errorf("%.60s: %v, want no duplicate found", tc.doc, err)
			}
			continue
		}
		if !errors.As(err, &pe) || pe.Path != tc.path || !strings.Contains(pe.Reason, fmt.Sprintf("%q appears twice", tc.name)) {
			t.Errorf("%.60s: %v, want path %q naming %q twice", tc.doc, err, tc.path, tc.name)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	s, err := payload.Compile([]byte(order))
	if err != nil {
		b.Fatal(err)
	}
	doc := []byte(`{"amount": 12.5, "lines": [{"sku": "abc-123", "qty": 1}, {"sku": "def-456", "qty": 3}, {"sku": "ghi-789", "qty": 2}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Validate(doc); err != nil {
			b.Fatal(err)
		}
	}
}
