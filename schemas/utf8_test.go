package schemas

import (
	"errors"
	"testing"
)

// Two ids that differ only in bytes that are not Unicode must not read as
// one: encoding/json would turn both into U+FFFD. Such records are
// malformed, in JSON and in Avro.
func TestStringsThatAreNotUnicodeAreMalformed(t *testing.T) {
	c, _ := newAvroCodec(t)
	for _, tc := range []struct {
		name, json string
	}{
		{"invalid UTF-8 in an id", "{\"intent_id\":\"a\xff\",\"intent_type\":\"t\",\"payload\":{}}"},
		{"invalid UTF-8 in the payload", "{\"intent_id\":\"a\",\"intent_type\":\"t\",\"payload\":{\"k\":\"\xc3\"}}"},
		{"a lone high surrogate", `{"intent_id":"a\ud800","intent_type":"t","payload":{}}`},
		{"a lone low surrogate", `{"intent_id":"a\udc00","intent_type":"t","payload":{}}`},
		{"a high surrogate then no low one", `{"intent_id":"a\ud800\u0041","intent_type":"t","payload":{}}`},
	} {
		var r IntentRequest
		err := c.Decode([]byte(tc.json), &r)
		if !errors.Is(err, ErrMalformed) || ErrorClass(err) != ClassMalformedJSON {
			t.Errorf("%s: %v (class %q), want malformed_json", tc.name, err, ErrorClass(err))
		}
	}
	for _, ok := range []string{
		`{"intent_id":"a\u00e9\ud83d\ude00","intent_type":"t","payload":{"k":"\\ud800 is text here"}}`,
		`{"intent_id":"a","intent_type":"t","payload":{"k":"\\\\\u0041\\"}}`,
	} {
		var r IntentRequest
		if err := c.Decode([]byte(ok), &r); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}

	// Avro carries bytes as they are: checked after decoding.
	b, err := c.Encode("mcp.agent.response", &AgentResponse{RequestID: "ok", Agent: "a", Status: StatusOK})
	if err != nil {
		t.Fatal(err)
	}
	// request_id is the first field: length 2 (zig-zag 4), then its bytes.
	body := b[wireHeaderLen:]
	if body[0] != 4 || string(body[1:3]) != "ok" {
		t.Fatalf("unexpected encoding %x", body)
	}
	body[2] = 0xff
	var resp AgentResponse
	if err := c.Decode(b, &resp); !errors.Is(err, ErrMalformed) || ErrorClass(err) != ClassMalformedAvro {
		t.Fatalf("invalid UTF-8 in an Avro request_id: %v (class %q), want malformed_avro", err, ErrorClass(err))
	}
}
