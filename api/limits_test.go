package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// readClose reads until the connection ends and returns its close error.
func (c *wsClient) readClose() *websocket.CloseError {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(testTimeout))
	var err error
	for err == nil {
		_, _, err = c.conn.ReadMessage()
	}
	var ce *websocket.CloseError
	if !errors.As(err, &ce) {
		c.t.Fatalf("connection ended with %v, not a close frame", err)
	}
	return ce
}

func TestStreamRateLimitAnswersThenCloses1008(t *testing.T) {
	h := newHarness(t, withConfig(func(c *api.Config) {
		c.MessageRate = 1
		c.MessageBurst = 3
	}))
	c := h.dial(nil)
	sub := func(i int) { c.sendText(`{"subscribe":{"session_id":"s` + strconv.Itoa(i) + `"}}`) }
	for i := range 3 { // the burst
		sub(i)
		c.expect("subscribed")
	}
	sub(3)
	if m := c.expect("error"); m.Error.Code != "rate_limited" || !strings.Contains(m.Error.Message, "1008") {
		t.Fatalf("over the rate: %+v", m.Error)
	}
	h.clock.Advance(time.Second) // one token back (rate 1/s)
	sub(4)
	c.expect("subscribed")

	// Going on over the rate: the third refusal (the burst) without the
	// bucket filling up in between closes the connection with 1008.
	sub(5)
	if m := c.expect("error"); m.Error.Code != "rate_limited" {
		t.Fatalf("got %+v", m.Error)
	}
	sub(6)
	sub(7) // ignored: the server is closing
	var ce *websocket.CloseError
	for ce == nil {
		_ = c.conn.SetReadDeadline(time.Now().Add(testTimeout))
		_, b, err := c.conn.ReadMessage()
		if err != nil {
			if !errors.As(err, &ce) {
				t.Fatalf("read: %v", err)
			}
			break
		}
		t.Fatalf("got %s before the close", b)
	}
	if ce.Code != websocket.ClosePolicyViolation {
		t.Fatalf("close %d, want 1008", ce.Code)
	}
	if n := metricValue(t, h.reg, "switchboard_ws_rate_limited_messages_total"); n != 3 {
		t.Fatalf("rate_limited_messages_total = %v, want 3", n)
	}
	if n := metricValue(t, h.reg, "switchboard_ws_rate_limit_disconnects_total"); n != 1 {
		t.Fatalf("rate_limit_disconnects_total = %v, want 1", n)
	}
}

func TestStreamRateLimitForgivesAClientThatSlowsDown(t *testing.T) {
	h := newHarness(t, withConfig(func(c *api.Config) {
		c.MessageRate = 1
		c.MessageBurst = 2
	}))
	c := h.dial(nil)
	for round := range 5 {
		c.subscribe(`{"session_id":"a"}`)
		c.subscribe(`{"session_id":"b"}`)
		c.sendText(`{"subscribe":{"session_id":"c"}}`) // one refusal a round: never 2 in a row
		if m := c.expect("error"); m.Error.Code != "rate_limited" {
			t.Fatalf("round %d: %+v", round, m.Error)
		}
		h.clock.Advance(2 * time.Second) // the bucket fills up again
	}
	c.subscribe(`{"session_id":"d"}`) // still open
}

func TestStreamCapsConnectionsPerTenant(t *testing.T) {
	h := newHarness(t, withAuth(nil), withConfig(func(c *api.Config) { c.MaxConnectionsPerTenant = 2 }))
	first, _, _ := h.tryDial("", bearer(keyAcme))
	second, _, _ := h.tryDial("", bearer(keyAcme))
	if first == nil || second == nil {
		t.Fatal("dial refused under the cap")
	}
	conn, resp, body := h.tryDial("", bearer(keyAcme))
	if conn != nil {
		t.Fatal("a third connection of the tenant was accepted")
	}
	wantRefusal(t, resp, body, http.StatusTooManyRequests, "too_many_connections")
	if n := metricValue(t, h.reg, "switchboard_ws_tenant_limit_refusals_total"); n != 1 {
		t.Fatalf("tenant_limit_refusals_total = %v", n)
	}
	// Another tenant is not affected.
	if g, resp, body := h.tryDial("", bearer(keyGlobex)); g == nil {
		t.Fatalf("globex refused: %d %s", resp.StatusCode, body)
	}
	// Closing one frees its place once the server has seen it go.
	_ = first.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"))
	_ = first.Close()
	eventually(t, "a new connection of the tenant after a close", func() bool {
		c, resp, body := h.tryDial("", bearer(keyAcme))
		if c == nil && resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("after a close: %d %s", resp.StatusCode, body)
		}
		return c != nil
	})
}

// TestStreamCapsConnectionsPerInstance: the instance holds at most
// MaxConnections stream connections of all tenants (WebSocket and event
// streams alike); one more is refused 503 overloaded, reason
// stream_connections, naming no tenant, and counted; a close frees a place.
func TestStreamCapsConnectionsPerInstance(t *testing.T) {
	h := newHarness(t, withAuth(nil), withConfig(func(c *api.Config) { c.MaxConnections = 2 }))
	first, _, _ := h.tryDial("", bearer(keyAcme))
	if first == nil {
		t.Fatal("dial refused under the cap")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := h.startRequest(ctx, "GET", "/v1/intents/x-1/events", "", bearer(keyGlobex))
	eventually(t, "two streams", func() bool { return metricValue(t, h.reg, "switchboard_sse_streams") == 1 })
	for _, try := range []func() (*http.Response, []byte){
		func() (*http.Response, []byte) { _, resp, body := h.tryDial("", bearer(keyGlobex)); return resp, body },
		func() (*http.Response, []byte) { return h.doWith("GET", "/v1/intents/x-2/events", "", bearer(keyAcme)) },
	} {
		resp, body := try()
		var rb struct {
			Error struct{ Code, Reason, Message string }
		}
		if err := json.Unmarshal(body, &rb); err != nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" ||
			rb.Error.Code != "overloaded" || rb.Error.Reason != "stream_connections" ||
			!strings.Contains(rb.Error.Message, "this instance already holds 2 stream connections") || strings.Contains(rb.Error.Message, "acme") {
			t.Fatalf("over the instance's cap: %d %v %s", resp.StatusCode, resp.Header, body)
		}
	}
	if n := metricValue(t, h.reg, "switchboard_api_admission_refused_total"); n != 2 {
		t.Fatalf("refused{stream_connections} = %v", n)
	}
	cancel()
	<-events
	eventually(t, "a new connection after a close", func() bool {
		c, resp, body := h.tryDial("", bearer(keyGlobex))
		if c == nil && resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("after a close: %d %s", resp.StatusCode, body)
		}
		return c != nil
	})
}

// TestSlowClientDoesNotDelayAFastOne: two clients subscribe to the same
// results; one stops reading. Every result reaches the fast one while the
// slow one is stalled, Results.Add (the router's side) never waits, and the
// slow one is closed with 1013 and counted. No timing is asserted: the test
// waits for conditions, with a deadline.
func TestSlowClientDoesNotDelayAFastOne(t *testing.T) {
	h := newHarness(t, withCapacity(16), withConfig(func(c *api.Config) { c.SendQueue = 4 }))
	slow := h.dial(nil)
	slow.subscribe(`{"session_id":"s"}`)
	fast := h.dial(nil)
	fast.subscribe(`{"session_id":"s"}`)

	big := schemas.Ptr(schemas.JSON(`"` + strings.Repeat("x", 128<<10) + `"`))
	add := func(id string) {
		r := result(id, "echo", "s")
		r.Answer = big
		mustNotBlock(t, "Results.Add", func() { h.results.Add(r) })
	}
	sent := 0
	for metricValue(t, h.reg, "switchboard_ws_slow_client_disconnects_total") == 0 {
		if sent == 2000 {
			t.Fatal("the slow client was never disconnected")
		}
		id := "r-" + strconv.Itoa(sent)
		add(id)
		sent++
		if m := fast.expect("result"); m.Result.IntentID != id {
			t.Fatalf("fast client got %s, want %s", m.Result.IntentID, id)
		}
	}
	const after = 50 // and more, with the slow one gone
	for i := range after {
		id := "after-" + strconv.Itoa(i)
		add(id)
		if m := fast.expect("result"); m.Result.IntentID != id {
			t.Fatalf("fast client got %s, want %s", m.Result.IntentID, id)
		}
	}
	if ce := slow.readClose(); ce.Code != websocket.CloseTryAgainLater {
		t.Fatalf("slow client closed with %d, want 1013", ce.Code)
	}
	eventually(t, "the slow connection to be gone", func() bool {
		return metricValue(t, h.reg, "switchboard_ws_connections") == 1
	})
	if n := metricValue(t, h.reg, "switchboard_ws_slow_client_disconnects_total"); n != 1 {
		t.Fatalf("slow disconnects = %v, want 1", n)
	}
	t.Logf("the slow client was dropped after %d results; the fast one received all %d", sent, sent+after)
}

func TestLimitsConfigValidate(t *testing.T) {
	for name, cfg := range map[string]api.Config{
		"MessageRate":             {MessageRate: -1},
		"MessageBurst":            {MessageBurst: -1},
		"MaxConnectionsPerTenant": {MaxConnectionsPerTenant: -1},
		"MaxConnections":          {MaxConnections: -1},
	} {
		if err := cfg.Validate(); !errors.Is(err, api.ErrInvalidConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: Validate = %v", name, err)
		}
	}
}

// TestStreamSurvivesMalformedFrames writes raw bytes that are not valid
// WebSocket frames from a client (unmasked, reserved bits and opcodes, a
// length past the read limit, a fragmented control frame, a truncated
// frame): the server drops that connection (no panic, nothing leaks) and
// other clients are served as before.
func TestStreamSurvivesMalformedFrames(t *testing.T) {
	h := newHarness(t, withConfig(func(c *api.Config) { c.MaxMessageBytes = 1024 }))
	good := h.dial(nil)
	good.subscribe(`{"session_id":"s"}`)
	for name, raw := range map[string][]byte{
		"unmasked text":        {0x81, 0x02, 'h', 'i'},
		"reserved bits":        {0xf1, 0x80, 0, 0, 0, 0},
		"reserved opcode":      {0x83, 0x80, 0, 0, 0, 0},
		"huge length":          {0x81, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4},
		"fragmented ping":      {0x09, 0x80, 0, 0, 0, 0},
		"continuation first":   {0x80, 0x80, 0, 0, 0, 0},
		"bad close code":       {0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe7},
		"truncated then close": {0x81, 0xfe, 0x01},
	} {
		t.Run(name, func(t *testing.T) {
			c := h.dial(nil)
			if _, err := c.conn.NetConn().Write(raw); err != nil {
				t.Fatal(err)
			}
			if name == "truncated then close" {
				_ = c.conn.NetConn().Close()
				return
			}
			_ = c.conn.NetConn().SetReadDeadline(time.Now().Add(testTimeout))
			var err error
			for err == nil { // whatever comes first (an error message, a close frame), the connection ends
				_, _, err = c.conn.ReadMessage()
			}
			if strings.Contains(err.Error(), "timeout") {
				t.Fatalf("the server kept a connection that sent %x: %v", raw, err)
			}
		})
	}
	// A well-formed frame of invalid UTF-8 is a bad message: an error
	// answer, and the connection stays.
	c := h.dial(nil)
	if _, err := c.conn.NetConn().Write([]byte{0x81, 0x82, 0, 0, 0, 0, 0xff, 0xfe}); err != nil {
		t.Fatal(err)
	}
	if m := c.expect("error"); m.Error.Code != "bad_message" {
		t.Fatalf("invalid UTF-8: %+v", m.Error)
	}
	c.subscribe(`{"session_id":"t"}`)
	_ = c.conn.Close()

	h.results.Add(result("after", "echo", "s"))
	if m := good.expect("result"); m.Result.IntentID != "after" {
		t.Fatalf("got %+v", m.Result)
	}
	eventually(t, "the bad connections to be gone", func() bool {
		return metricValue(t, h.reg, "switchboard_ws_connections") == 1
	})
}
