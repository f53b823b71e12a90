package api_test

import (
	"context"
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

func TestStreamSubscribeByIntentIDGetsExactlyThatResult(t *testing.T) {
	h := newHarness(t)
	c := h.dial(nil)
	c.subscribe(`{"intent_ids":["a"]}`)

	h.results.Add(result("b", "echo", "s-1"))
	h.results.Add(result("a", "echo", "s-1"))
	m := c.expect("result")
	if m.Result.IntentID != "a" || *m.Result.Answer != `{"ok":true}` {
		t.Fatalf("got result %+v, want a", m.Result)
	}
	h.results.Add(result("c", "echo", "s-1"))
	h.results.Add(result("a", "echo", "s-1")) // a redelivery: not sent again
	c.barrier()
	if n := metricValue(t, h.reg, "switchboard_ws_messages_sent_total"); n < 2 {
		t.Fatalf("ws_messages_sent_total = %v", n)
	}
}

func TestStreamSubscribeBySessionGetsThatSessionOnly(t *testing.T) {
	h := newHarness(t)
	c := h.dial(nil)
	c.subscribe(`{"session_id":"s-1"}`)

	h.results.Add(result("x", "echo", "s-2"))
	h.results.Add(result("y", "echo", ""))
	h.results.Add(result("z", "echo", "s-1"))
	h.results.Add(result("w", "echo", "s-1"))
	for _, want := range []string{"z", "w"} {
		if m := c.expect("result"); m.Result.IntentID != want || *m.Result.SessionID != "s-1" {
			t.Fatalf("got %+v, want %s", m.Result, want)
		}
	}
	c.barrier()
}

func TestStreamSubscribeByIntentType(t *testing.T) {
	h := newHarness(t)
	c := h.dial(nil)
	c.subscribe(`{"intent_type":"fraud_check"}`)
	h.results.Add(result("x", "echo", ""))
	h.results.Add(result("y", "fraud_check", ""))
	if m := c.expect("result"); m.Result.IntentID != "y" {
		t.Fatalf("got %+v", m.Result)
	}
	c.barrier()
}

func TestStreamSendsAResultOncePerConnection(t *testing.T) {
	h := newHarness(t)
	c := h.dial(nil)
	c.subscribe(`{"intent_ids":["a"],"session_id":"s-1","intent_type":"echo"}`)
	h.results.Add(result("a", "echo", "s-1"))
	if m := c.expect("result"); m.Result.IntentID != "a" {
		t.Fatalf("got %+v", m.Result)
	}
	c.barrier()
}

func TestStreamSendsAStoredResultOnSubscribe(t *testing.T) {
	h := newHarness(t)
	h.results.Add(result("early", "echo", ""))
	c := h.dial(nil)
	c.sendText(`{"subscribe":{"intent_ids":["early","later"]}}`)
	c.expect("subscribed") // the acknowledgement comes first
	if m := c.expect("result"); m.Result.IntentID != "early" {
		t.Fatalf("got %+v", m.Result)
	}
	h.results.Add(result("later", "echo", ""))
	if m := c.expect("result"); m.Result.IntentID != "later" {
		t.Fatalf("got %+v", m.Result)
	}
	c.barrier()
}

func TestStreamSubscribeRightAfterPostNeverMissesTheResult(t *testing.T) {
	h := newHarness(t)
	h.pub.Func = func(_ context.Context, req *schemas.IntentRequest) error {
		h.results.Add(result(req.IntentID, req.IntentType, "")) // faster than any client
		return nil
	}
	resp, body := h.do("POST", "/v1/intents", `{"intent_type":"echo","payload":{}}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	id := decode[acceptedBody](t, body).IntentID
	c := h.dial(nil)
	c.subscribe(`{"intent_ids":["` + id + `"]}`)
	if m := c.expect("result"); m.Result.IntentID != id {
		t.Fatalf("got %+v", m.Result)
	}
}

func TestStreamUnsubscribe(t *testing.T) {
	h := newHarness(t)
	c := h.dial(nil)
	c.subscribe(`{"session_id":"s-1"}`)
	c.sendText(`{"unsubscribe":{"session_id":"s-1"}}`)
	c.expect("unsubscribed")
	h.results.Add(result("a", "echo", "s-1"))
	c.barrier()
}

func TestStreamBadMessageGetsAnErrorAndTheConnectionStays(t *testing.T) {
	h := newHarness(t)
	c := h.dial(nil)
	for _, bad := range []string{
		`not json`,
		`{"subscribe":{"intent_ids":["a"]}`,
		`{"hello":1}`,
		`{}`,
		`{"subscribe":{}}`,
		`{"subscribe":{"intent_ids":[""]}}`,
		`{"subscribe":{"intent_type":"Not A Type"}}`,
		`{"subscribe":{"session_id":"s"},"unsubscribe":{"session_id":"s"}}`,
		`{"subscribe":{"session_id":"s"}} {"subscribe":{"session_id":"t"}}`,
	} {
		c.sendText(bad)
		m := c.expect("error")
		if m.Error == nil || m.Error.Code != "bad_message" || m.Error.Message == "" {
			t.Fatalf("%s: error = %+v", bad, m.Error)
		}
	}
	if err := c.conn.WriteMessage(websocket.BinaryMessage, []byte{1, 2}); err != nil {
		t.Fatal(err)
	}
	if m := c.expect("error"); m.Error.Code != "bad_message" {
		t.Fatalf("binary: %+v", m.Error)
	}
	c.subscribe(`{"session_id":"s-1"}`)
	h.results.Add(result("a", "echo", "s-1"))
	if m := c.expect("result"); m.Result.IntentID != "a" {
		t.Fatalf("got %+v", m.Result)
	}
}

func TestStreamCapsSubscriptionsPerConnection(t *testing.T) {
	h := newHarness(t, withConfig(func(c *api.Config) { c.MaxSubscriptions = 2 }))
	c := h.dial(nil)
	c.sendText(`{"subscribe":{"intent_ids":["a","b","c"]}}`)
	if m := c.expect("error"); m.Error.Code != "too_many_subscriptions" {
		t.Fatalf("got %+v", m.Error)
	}
	c.subscribe(`{"intent_ids":["a","a","b"]}`) // duplicates count once
	c.sendText(`{"subscribe":{"session_id":"s"}}`)
	if m := c.expect("error"); m.Error.Code != "too_many_subscriptions" {
		t.Fatalf("got %+v", m.Error)
	}
	// An intent-id subscription ends with its result, freeing its place.
	h.results.Add(result("a", "echo", ""))
	c.expect("result")
	c.subscribe(`{"session_id":"s"}`)
}

func TestStreamSlowClientIsDisconnectedWith1013AndOthersKeepReceiving(t *testing.T) {
	h := newHarness(t, withCapacity(8), withConfig(func(c *api.Config) { c.SendQueue = 2 }))
	slow := h.dial(nil)
	slow.subscribe(`{"session_id":"slow"}`)
	fast := h.dial(nil)
	fast.subscribe(`{"session_id":"fast"}`)

	// The slow client never reads: once the socket buffers are full its
	// writer blocks and its queue of 2 overflows.
	big := schemas.Ptr(schemas.JSON(`"` + strings.Repeat("x", 256<<10) + `"`))
	for i := 0; metricValue(t, h.reg, "switchboard_ws_slow_client_disconnects_total") == 0; i++ {
		if i == 1000 {
			t.Fatal("the slow client was never disconnected")
		}
		r := result("slow-"+strconv.Itoa(i), "echo", "slow")
		r.Answer = big
		mustNotBlock(t, "Results.Add", func() { h.results.Add(r) })
		mustNotBlock(t, "Results.Add", func() { h.results.Add(result("fast-"+strconv.Itoa(i), "echo", "fast")) })
		if m := fast.expect("result"); m.Result.IntentID != "fast-"+strconv.Itoa(i) {
			t.Fatalf("fast client got %+v", m.Result)
		}
	}

	// The slow client now reads what was written before the close, then the
	// close frame.
	_ = slow.conn.SetReadDeadline(time.Now().Add(testTimeout))
	var err error
	for err == nil {
		_, _, err = slow.conn.ReadMessage()
	}
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseTryAgainLater {
		t.Fatalf("slow client: %v, want close 1013", err)
	}

	h.results.Add(result("after", "echo", "fast"))
	if m := fast.expect("result"); m.Result.IntentID != "after" {
		t.Fatalf("fast client got %+v", m.Result)
	}
	eventually(t, "one connection left", func() bool {
		return metricValue(t, h.reg, "switchboard_ws_connections") == 1
	})
	if n := metricValue(t, h.reg, "switchboard_ws_slow_client_disconnects_total"); n != 1 {
		t.Fatalf("slow disconnects = %v, want 1", n)
	}
}

func TestStreamShutdownClosesConnectionsWith1001(t *testing.T) {
	h := newHarness(t)
	a, b := h.dial(nil), h.dial(nil)
	a.subscribe(`{"session_id":"s"}`)
	b.subscribe(`{"session_id":"s"}`)

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		done <- h.srv.Shutdown(ctx)
	}()
	for _, c := range []*wsClient{a, b} {
		_ = c.conn.SetReadDeadline(time.Now().Add(testTimeout))
		_, _, err := c.conn.ReadMessage() // answers the close frame
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
			t.Fatalf("read: %v, want close 1001", err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if n := metricValue(t, h.reg, "switchboard_ws_connections"); n != 0 {
		t.Fatalf("ws_connections = %v after Shutdown", n)
	}
	// New streams are refused.
	url := "ws" + strings.TrimPrefix(h.ts.URL, "http") + "/v1/stream"
	_, resp, err := websocket.DefaultDialer.Dial(url, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("dial after Shutdown: %v %v", err, resp)
	}
	resp.Body.Close()
}

func TestStreamShutdownForcesClientsThatDoNotAnswer(t *testing.T) {
	h := newHarness(t)
	c := h.dial(nil) // never reads, so never answers the close frame
	c.sendText(`{"subscribe":{"session_id":"s"}}`)
	eventually(t, "the connection is tracked", func() bool {
		return metricValue(t, h.reg, "switchboard_ws_connections") == 1
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no grace at all
	if err := h.srv.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown = %v, want context.Canceled", err)
	}
	if n := metricValue(t, h.reg, "switchboard_ws_connections"); n != 0 {
		t.Fatalf("ws_connections = %v after Shutdown", n)
	}
}

func TestStreamDropsClientsThatStopAnsweringPings(t *testing.T) {
	h := newHarness(t, withConfig(func(c *api.Config) {
		c.PingPeriod = time.Second
		c.PongWait = 3 * time.Second
	}))
	alive := h.dial(nil)
	silent := h.dial(nil) // never reads nor writes: never pongs
	alive.subscribe(`{"session_id":"s"}`)
	eventually(t, "two connections", func() bool {
		return metricValue(t, h.reg, "switchboard_ws_connections") == 2
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := h.clock.BlockUntilContext(ctx, 1); err != nil { // the keepalive ticker
		t.Fatal(err)
	}
	// A fake ticker drops ticks its reader has not taken yet, and a loaded
	// machine may not schedule the keepalive goroutine between two advances:
	// keep advancing until the silent client is dropped, within a deadline.
	deadline := time.Now().Add(testTimeout)
	for metricValue(t, h.reg, "switchboard_ws_connections") == 2 {
		if time.Now().After(deadline) {
			t.Fatal("the silent client was never dropped")
		}
		h.clock.Advance(time.Second)
		alive.barrier() // a message proves liveness as a pong does
	}
	_ = silent.conn.SetReadDeadline(time.Now().Add(testTimeout))
	var err error
	for err == nil {
		_, _, err = silent.conn.ReadMessage() // pings, then the end
	}
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("silent client still connected: %v", err)
	}
	h.results.Add(result("a", "echo", "s"))
	if m := alive.expect("result"); m.Result.IntentID != "a" {
		t.Fatalf("got %+v", m.Result)
	}
}

func TestStreamOriginCheck(t *testing.T) {
	h := newHarness(t, withConfig(func(c *api.Config) { c.AllowedOrigins = []string{"https://console.example.com"} }))
	h.dial(http.Header{"Origin": {"https://console.example.com"}}).subscribe(`{"session_id":"s"}`)
	h.dial(nil).subscribe(`{"session_id":"s"}`) // no Origin: not a browser

	url := "ws" + strings.TrimPrefix(h.ts.URL, "http") + "/v1/stream"
	_, resp, err := websocket.DefaultDialer.Dial(url, http.Header{"Origin": {"https://evil.example.com"}})
	if err == nil {
		t.Fatal("a foreign origin was allowed")
	}
	defer resp.Body.Close()
	body := make([]byte, 512)
	n, _ := resp.Body.Read(body)
	wantError(t, resp, body[:n], http.StatusForbidden, "forbidden_origin", "")
}

func TestStreamPlainGetIsABadHandshake(t *testing.T) {
	h := newHarness(t)
	resp, body := h.do("GET", "/v1/stream", "")
	wantError(t, resp, body, http.StatusBadRequest, "bad_handshake", "")
}

func TestStreamClosesWith1009OnAnOversizedMessage(t *testing.T) {
	h := newHarness(t, withConfig(func(c *api.Config) { c.MaxMessageBytes = 1024 }))
	c := h.dial(nil)
	c.sendText(`{"subscribe":{"session_id":"` + strings.Repeat("s", 2048) + `"}}`)
	_ = c.conn.SetReadDeadline(time.Now().Add(testTimeout))
	_, _, err := c.conn.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseMessageTooBig {
		t.Fatalf("read: %v, want close 1009", err)
	}
}

// A client that stops reading while results keep coming gets every one of
// them, in order, once it reads again: the writes its socket could not take
// go to the connection's own writer (counted), and later results flow again.
func TestStreamClientThatFallsBehindGetsEverythingInOrder(t *testing.T) {
	h := newHarness(t, withCapacity(512), withConfig(func(c *api.Config) { c.SendQueueBytes = 32 << 20 }))
	c := h.dial(nil)
	c.subscribe(`{"session_id":"s"}`)

	// 200 answers of 64 KiB, more than loopback's socket buffers hold, and
	// fewer than the send queue's 256 messages and 32 MiB: nothing may be
	// dropped.
	const n = 200
	big := schemas.Ptr(schemas.JSON(`"` + strings.Repeat("x", 64<<10) + `"`))
	for i := range n {
		r := result("behind-"+strconv.Itoa(i), "echo", "s")
		r.Answer = big
		mustNotBlock(t, "Results.Add", func() { h.results.Add(r) })
	}
	eventually(t, "a write handed to the connection's writer", func() bool {
		return metricValue(t, h.reg, "switchboard_ws_write_handoffs_total") > 0
	})
	for i := range n {
		if m := c.expect("result"); m.Result.IntentID != "behind-"+strconv.Itoa(i) {
			t.Fatalf("message %d: got %s", i, m.Result.IntentID)
		}
	}
	h.results.Add(result("after", "echo", "s"))
	if m := c.expect("result"); m.Result.IntentID != "after" {
		t.Fatalf("after catching up: got %s", m.Result.IntentID)
	}
	if got := metricValue(t, h.reg, "switchboard_ws_slow_client_disconnects_total"); got != 0 {
		t.Fatalf("%v slow-client disconnects, want 0", got)
	}
}
