package schemas

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// handlerTransport serves HTTP requests with a handler in process: no
// sockets, no goroutines, fast enough for fuzzing.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	t.h.ServeHTTP(w, r)
	return w.Result(), nil
}

// newInProcessCodec returns an Avro codec on an in-process fake registry.
func newInProcessCodec(tb testing.TB) (*Codec, *srfake.Registry) {
	tb.Helper()
	fake := srfake.NewRegistry()
	reg, err := NewRegistry("http://registry.invalid", WithHTTPClient(&http.Client{Transport: handlerTransport{fake.Handler()}}))
	if err != nil {
		tb.Fatal(err)
	}
	c, err := NewCodec(WithRegistry(reg))
	if err != nil {
		tb.Fatal(err)
	}
	return c, fake
}

// FuzzDecode feeds arbitrary bytes to Decode for every record type. Decode
// must not panic, must fail with a classified *DecodeError, and whatever it
// accepts must encode and decode again.
func FuzzDecode(f *testing.F) {
	c, fake := newInProcessCodec(f)
	// Registered in a fixed order, so every fuzz worker gets the same ids.
	for _, r := range sampleRecords() {
		f.Add(mustEncode(f, c, EncodingAvro, "fuzz."+SchemaName(r), r))
		f.Add(mustEncode(f, c, EncodingJSON, "", r))
	}
	// Records of newer writer schemas, resolved on decoding.
	text := `{"type":"record","name":"AgentResponse","namespace":"mcp.switchboard","fields":[` +
		`{"name":"request_id","type":"string"},{"name":"tags","type":{"type":"array","items":"string"}},` +
		`{"name":"agent","type":"string"},{"name":"extra","type":{"type":"map","values":["null","bytes"]}},` +
		`{"name":"status","type":{"type":"enum","name":"Status","symbols":["ok","partial","error","progress","unknown"],"default":"unknown"}},` +
		`{"name":"answer","type":["null","string"],"default":null}]}`
	f.Add(writeWith(f, fake, "fuzz.evolved-value", text, map[string]any{
		"request_id": "i", "tags": []string{"a", "b"}, "agent": "a",
		"extra": map[string]any{"k": []byte("v"), "n": nil}, "status": "partial", "answer": `{"x":[1,2]}`,
	}))
	f.Add([]byte(`{"payload":{"a":[1,{"b":null}]},"features":{"x":1e308},"timeline":{"received_at":-1}}`))
	f.Add([]byte{0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f})

	f.Fuzz(func(t *testing.T, data []byte) {
		for _, k := range allKinds {
			r := newZero(k)
			err := c.Decode(data, r)
			if err != nil {
				var de *DecodeError
				if !errors.As(err, &de) || de.Class == "" || de.Class == ClassOther {
					t.Fatalf("unclassified error %T: %v", err, err)
				}
				continue
			}
			b, err := c.EncodeAs(EncodingAvro, "fuzz.again", r)
			if err != nil {
				t.Fatalf("decoded %+v from %q but cannot encode it: %v", r, data, err)
			}
			again := newZero(k)
			if err := c.Decode(b, again); err != nil {
				t.Fatalf("re-encoded %+v does not decode: %v", r, err)
			}
		}
	})
}
