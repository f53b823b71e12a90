package api

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/gorilla/websocket"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// newFuzzConn is a stream connection without a socket: what the reader
// hands to receive goes through the rate limit and the message handler, and
// what the server answers lands in the queue.
func newFuzzConn(s *Server) *wsConn {
	c := &wsConn{
		srv:        s,
		queue:      newSendQueue(s.cfg.SendQueue, s.cfg.SendQueueBytes),
		ping:       make(chan struct{}, 1),
		slow:       make(chan struct{}),
		away:       make(chan struct{}),
		policy:     make(chan struct{}),
		readerDone: make(chan struct{}),
		writerDone: make(chan struct{}),
	}
	c.sub = newSubscriber(c)
	c.sub.scope(&principal{tenant: "acme"})
	return c
}

// FuzzClientFrame feeds arbitrary client messages, text or binary, to a
// connection's reader path (receive: rate limit, decode, subscribe,
// unsubscribe). Whatever the bytes, the server must not panic and must
// answer each message with exactly one message: an error (with a code and a
// message) or, for a valid message, its acknowledgement.
//
// Run it with: go test -run '^$' -fuzz FuzzClientFrame -fuzztime 60s ./api/
// The seed corpus is in testdata/fuzz/FuzzClientFrame and below.
func FuzzClientFrame(f *testing.F) {
	for _, seed := range []string{
		`{"subscribe":{"intent_ids":["a","b"]}}`,
		`{"subscribe":{"session_id":"s-42"}}`,
		`{"subscribe":{"intent_type":"fraud_check"}}`,
		`{"unsubscribe":{"session_id":"s-42"}}`,
		`{"subscribe":{"intent_ids":["a"],"session_id":"s","intent_type":"echo"}}`,
		`{"subscribe":{}}`,
		`{"subscribe":null}`,
		`{"subscribe":{"intent_ids":[""]}}`,
		`{"subscribe":{"intent_ids":null,"session_id":""}}`,
		`{"subscribe":{"session_id":"s"},"unsubscribe":{"session_id":"s"}}`,
		`{"subscribe":{"session_id":"s"}} {"subscribe":{"session_id":"t"}}`,
		`{"subscribe":{"intent_type":"Not A Type"}}`,
		`{"resume":{"0":12}}`,
		`[]`, `null`, `""`, `1e999`, `{`, `}`, "\xff\xfe", "{\"subscribe\":{\"session_id\":\"\x00\"}}",
	} {
		f.Add(false, []byte(seed))
	}
	f.Add(true, []byte{0x81, 0x00, 0xff})
	f.Add(true, []byte(`{"subscribe":{"session_id":"s"}}`))

	srv, err := New(Config{Listen: "127.0.0.1:0", SendQueue: 64, MaxSubscriptions: 8},
		nopPublisher{}, NewResults(0),
		WithRegisterer(prometheus.NewRegistry()), WithLogger(slog.New(slog.DiscardHandler)),
		WithClock(clockwork.NewFakeClock()))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, binary bool, data []byte) {
		c := newFuzzConn(srv)
		defer srv.results.unsubscribeAll(c.sub)
		typ := websocket.TextMessage
		if binary {
			typ = websocket.BinaryMessage
		}
		c.receive(typ, data)
		answers := c.queue.takeOrRelease() // a pinned queue: all of it
		if n := len(answers); n != 1 {
			t.Fatalf("%q: %d answers, want 1", data, n)
		}
		var m struct {
			Type         string          `json:"type"`
			Subscription json.RawMessage `json:"subscription"`
			Error        *errorBody      `json:"error"`
		}
		dec := json.NewDecoder(bytes.NewReader(answers[0]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("%q: the answer is not a server message: %v", data, err)
		}
		switch m.Type {
		case "subscribed", "unsubscribed":
			if binary {
				t.Fatalf("a binary message was %s", m.Type)
			}
		case "error":
			if m.Error == nil || m.Error.Code == "" || m.Error.Message == "" {
				t.Fatalf("%q: error answer without a code or message: %+v", data, m.Error)
			}
		default:
			t.Fatalf("%q: answered with a %q message", data, m.Type)
		}
	})
}

type nopPublisher struct{}

func (nopPublisher) PublishIntent(_ context.Context, _ *schemas.IntentRequest) error { return nil }

func (nopPublisher) PublishCancel(_ context.Context, _ intents.Cancel) error { return nil }
