package mcp_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// TestSessionCancelNotification: in a session, notifications/cancelled
// for a call in flight writes the cancel record.
func TestSessionCancelNotification(t *testing.T) {
	h := newHarness(t, nil)
	sid := h.session(keyAcme)
	done := make(chan rpc, 1)
	go func() {
		done <- h.post(keyAcme, sessionHdr(sid), `{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	}()
	bctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	waitFor(t, func() bool { return len(h.pub.Requests()) == 1 }) // its body is read
	if err := h.clock.BlockUntilContext(bctx, 1); err != nil {    // the call waits
		t.Fatal(err)
	}
	h.post(keyAcme, sessionHdr(sid), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c1","reason":"user gave up"}}`)
	waitFor(t, func() bool { return len(h.pub.Cancels()) == 1 })
	c := h.pub.Cancels()[0]
	if c.IntentID != h.pub.Requests()[0].IntentID || c.Tenant != "acme" || c.Reason != "user gave up" {
		t.Fatalf("cancel %+v", c)
	}
	h.ts.CloseClientConnections()
	<-done
}

// TestBadInput: malformed JSON-RPC, unknown methods and tools, oversized
// requests, a missing credential and another tenant's session: a JSON-RPC
// error or 401/403/413, nothing published, nothing of another tenant
// revealed.
func TestBadInput(t *testing.T) {
	h := newHarness(t, nil)
	sid := h.session(keyAcme)
	for _, tc := range []struct {
		name, key string
		hdr       map[string]string
		body      string
		status    int
		want      string
	}{
		{"malformed JSON", keyAcme, sessionHdr(sid), `{"jsonrpc":"2.0","id":1,"method":`, 0, ""},
		{"not JSON-RPC", keyAcme, sessionHdr(sid), `[1,2,3]`, 0, ""},
		{"unknown method", keyAcme, sessionHdr(sid), `{"jsonrpc":"2.0","id":2,"method":"tools/teleport","params":{}}`, 0, ""},
		{"unknown tool", keyAcme, sessionHdr(sid), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, http.StatusOK, `unknown tool`},
		{"arguments not an object", keyAcme, sessionHdr(sid), `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"fraud_check","arguments":[1]}}`, 0, ""},
		{"oversized", keyAcme, sessionHdr(sid), `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"x":"` + strings.Repeat("a", 70<<10) + `"}}}`, http.StatusRequestEntityTooLarge, ""},
		{"no credential", "", sessionHdr(sid), `{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{}}`, http.StatusUnauthorized, ""},
		{"bad credential", "not-a-key-at-all-really", sessionHdr(sid), `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`, http.StatusUnauthorized, ""},
		{"another tenant's session", keyOther, sessionHdr(sid), `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{}}}`, http.StatusForbidden, ""},
	} {
		r := h.post(tc.key, tc.hdr, tc.body)
		switch {
		case tc.status == 0:
			// A JSON-RPC error, or a 4xx.
			if r.status < 400 && !strings.Contains(r.body, `"error"`) && !strings.Contains(r.body, `"isError":true`) {
				t.Errorf("%s: %d %s, want an error", tc.name, r.status, r.body)
			}
		case r.status != tc.status || !strings.Contains(r.body, tc.want):
			t.Errorf("%s: %d %.300s, want %d with %q", tc.name, r.status, r.body, tc.status, tc.want)
		}
		if tc.status == http.StatusUnauthorized && !strings.Contains(r.header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: no WWW-Authenticate", tc.name)
		}
	}
	if n := len(h.pub.Requests()); n != 0 {
		t.Fatalf("%d intents published, want none", n)
	}
	// Another tenant's credential never sees the first tenant's intents.
	h.post(keyAcme, sessionHdr(sid), `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"secret":"s3"}}}`)
	osid := h.session(keyOther)
	r := h.post(keyOther, sessionHdr(osid), `{"jsonrpc":"2.0","id":9,"method":"tasks/list","params":{}}`)
	if strings.Contains(r.body, h.pub.Requests()[0].IntentID) || strings.Contains(r.body, "s3") {
		t.Fatalf("another tenant's list leaks: %s", r.body)
	}
	// A browser page from another origin is refused before anything runs.
	r = h.post(keyAcme, map[string]string{"Origin": "http://evil.example.com"}, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if r.status != http.StatusForbidden {
		t.Fatalf("foreign origin: %d %s", r.status, r.body)
	}
}

// TestTaskMethodsWithoutParams: tasks/* without params are JSON-RPC errors
// (or an empty list), never a crash.
func TestTaskMethodsWithoutParams(t *testing.T) {
	h := newHarness(t, nil)
	sid := h.session(keyAcme)
	for _, m := range []string{"tasks/list", "tasks/get", "tasks/result", "tasks/cancel", "tasks/update"} {
		r := h.post(keyAcme, sessionHdr(sid), `{"jsonrpc":"2.0","id":1,"method":"`+m+`"}`)
		if r.reply() == nil && r.status < 400 {
			t.Errorf("%s: %d %s", m, r.status, r.body)
		}
	}
	if r := h.post(keyAcme, sessionHdr(sid), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); !strings.Contains(r.body, "echo") {
		t.Fatalf("the server is gone: %d %s", r.status, r.body)
	}
}

// TestShutdownEndsWaitingCalls: a call waiting for its result answers at
// once when the endpoint shuts down, naming the intent, which goes on.
func TestShutdownEndsWaitingCalls(t *testing.T) {
	h := newHarness(t, nil)
	sid := h.session(keyAcme)
	done := make(chan rpc, 1)
	go func() {
		done <- h.post(keyAcme, sessionHdr(sid), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	}()
	bctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	// The API's body-read timer is on the same fake clock until the body
	// has been read: wait for the publish, which follows it, first.
	waitFor(t, func() bool { return len(h.pub.Requests()) == 1 })
	if err := h.clock.BlockUntilContext(bctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := h.ep.Shutdown(bctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if !strings.Contains(r.body, "shutting down") || !strings.Contains(r.body, h.pub.Requests()[0].IntentID) {
		t.Fatalf("the waiting call: %d %s", r.status, r.body)
	}
	if n := len(h.pub.Cancels()); n != 0 {
		t.Fatalf("shutdown cancelled %d intents; they go on", n)
	}
}
