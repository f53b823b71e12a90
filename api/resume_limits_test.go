package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/gorilla/websocket"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/apitest"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// TestStreamReplayHeldBackBytesAreCapped: live messages held back while a
// resume replays are capped in bytes (SendQueue x 64 KiB), not only in
// number: past the cap the client is closed with 1013.
func TestStreamReplayHeldBackBytesAreCapped(t *testing.T) {
	hist := &scanHistory{Log: apitest.NewLog(1)}
	h := newHarness(t, withOption(api.WithHistory(hist)), withConfig(func(c *api.Config) { c.SendQueue = 2 }))
	hist.Attach(h.results, true)
	big := func(i int) *schemas.IntentResult {
		r := sessionResult(i, "s")
		r.Answer = schemas.Ptr(schemas.JSON(`"` + strings.Repeat("x", 60<<10) + `"`))
		return r
	}
	hist.more = func(_ context.Context, fn func(api.Record) error) error {
		for i := range 3 { // 3 x 60 KiB > 2 x 64 KiB, 3 < 16 x 2 messages
			hist.AppendResult(big(i))
		}
		if err := fn(otherRecord(0)); err == nil {
			t.Error("the replay read on past the cap")
		}
		return nil
	}
	c := h.dial(nil)
	c.sendText(resumeMsg(h.results.Position().String(), `{"session_id":"s"}`))
	for {
		_ = c.conn.SetReadDeadline(time.Now().Add(testTimeout))
		_, b, err := c.conn.ReadMessage()
		if err != nil {
			if !websocket.IsCloseError(err, websocket.CloseTryAgainLater) {
				t.Fatalf("read: %v, want close 1013", err)
			}
			return
		}
		if strings.Contains(string(b), big(2).IntentID) {
			t.Fatal("all the held-back messages were delivered, want close 1013 past the byte cap")
		}
	}
}

// TestStreamReplaysAreCapped: at most MaxReplays resumes replay at once on
// a server, MaxReplaysPerTenant of a tenant; one more is answered
// resume_unavailable, and may retry once a slot is free.
func TestStreamReplaysAreCapped(t *testing.T) {
	hist := &scanHistory{Log: apitest.NewLog(1)}
	h := newHarness(t, withOption(api.WithHistory(hist)), withAuth(nil), withConfig(func(c *api.Config) {
		c.MaxReplays = 2
		c.MaxReplaysPerTenant = 1
	}))
	hist.Attach(h.results, true)
	started, release := make(chan struct{}, 4), make(chan struct{})
	hist.more = func(ctx context.Context, _ func(api.Record) error) error {
		started <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	dial := func(hdr http.Header) *wsClient {
		conn, _, body := h.tryDial("", hdr)
		if conn == nil {
			t.Fatalf("dial refused: %s", body)
		}
		return &wsClient{t: t, conn: conn}
	}
	cursor := h.results.Position().String()
	resume := func(c *wsClient) { c.sendText(resumeMsg(cursor, `{"session_id":"s"}`)) }
	replaying := func() {
		t.Helper()
		select {
		case <-started:
		case <-time.After(testTimeout):
			t.Fatal("the replay never started")
		}
	}
	refused := func(c *wsClient, what string) {
		t.Helper()
		if m := c.read(); m.Type != "error" || m.Error.Code != "resume_unavailable" {
			t.Fatalf("%s: got %q %+v, want resume_unavailable", what, m.Type, m)
		}
	}
	initech := bearer(sign(t, jwt.SigningMethodHS256, hsSecret, claims(h.clock.Now(), "initech", nil)))

	a, b, g, i := dial(bearer(keyAcme)), dial(bearer(keyAcme)), dial(bearer(keyGlobex)), dial(initech)
	resume(a)
	replaying()
	resume(b)
	refused(b, "acme's second replay")
	resume(g)
	replaying()
	resume(i)
	refused(i, "the server's third replay")
	close(release)
	a.expect("resumed")
	g.expect("resumed")
	// The slots are freed just after "resumed" is sent: retry until then.
	deadline := time.Now().Add(testTimeout)
	for {
		resume(i)
		m := i.read()
		if m.Type == "resumed" {
			break
		}
		if m.Type != "error" || m.Error.Code != "resume_unavailable" || time.Now().After(deadline) {
			t.Fatalf("retry: got %q %+v, want resumed", m.Type, m)
		}
	}
}
