package api_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// dialSlow opens a stream whose socket buffers little, so that a client
// that stops reading holds up the server's writes soon.
func (h *harness) dialSlow() *wsClient {
	h.t.Helper()
	d := websocket.Dialer{
		HandshakeTimeout: testTimeout,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetReadBuffer(4 << 10)
			}
			return c, err
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	conn, _, err := d.DialContext(ctx, "ws"+strings.TrimPrefix(h.ts.URL, "http")+"/v1/stream", nil)
	if err != nil {
		h.t.Fatalf("dial: %v", err)
	}
	h.t.Cleanup(func() { _ = conn.Close() })
	return &wsClient{t: h.t, conn: conn}
}

// bigResult is a result of session s with an answer of about n bytes.
func bigResult(id, session string, n int) *schemas.IntentResult {
	r := result(id, "echo", session)
	r.Answer = schemas.Ptr(schemas.JSON(`"` + strings.Repeat("x", n) + `"`))
	return r
}

// readToClose reads until the connection ends and returns how it ended.
func (c *wsClient) readToClose() (int, error) {
	c.t.Helper()
	n := 0
	for {
		_ = c.conn.SetReadDeadline(time.Now().Add(testTimeout))
		if _, _, err := c.conn.ReadMessage(); err != nil {
			return n, err
		}
		n++
	}
}

func wantClose(t *testing.T, err error, code int) {
	t.Helper()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != code {
		t.Fatalf("the connection ended with %v, want close code %d", err, code)
	}
}

// Finding 9: a client that stops reading, while a write to it is stuck, is
// not just dropped: it is counted as slow and sent the 1013 close frame
// (best effort: bounded by write_wait), which it sees once it reads again.
func TestStalledClientIsClosedWith1013(t *testing.T) {
	h := newHarness(t, withSendBuffers(8<<10))
	c := h.dialSlow()
	c.subscribe(`{"session_id":"s"}`)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := h.clock.BlockUntilContext(ctx, 1); err != nil { // the keepalive ticker
		t.Fatal(err)
	}
	for i := range 100 { // 800 KB: far more than the sockets hold, fewer than send_queue messages
		h.results.Add(bigResult("r-"+strings.Repeat("x", i), "s", 8<<10))
	}
	eventually(t, "a write to the client to block", func() bool { return api.WriteInProgress(h.srv) })
	h.clock.Advance(api.DefaultPingPeriod) // past write_wait: the keepalive check finds the write stalled
	eventually(t, "the client counted as slow", func() bool {
		return metricValue(t, h.reg, "switchboard_ws_slow_client_disconnects_total") == 1
	})
	n, err := c.readToClose()
	wantClose(t, err, websocket.CloseTryAgainLater)
	if n == 0 || n >= 100 {
		t.Fatalf("read %d results before the close, want some but not all", n)
	}
}

// Finding 9: the send queue is capped in bytes as well as in messages: large
// messages overflow it long before send_queue of them wait.
func TestSendQueueIsCappedInBytes(t *testing.T) {
	h := newHarness(t, withSendBuffers(8<<10), withConfig(func(c *api.Config) {
		c.SendQueue = 10_000
		c.SendQueueBytes = 64 << 10
	}))
	c := h.dialSlow()
	c.subscribe(`{"session_id":"s"}`)
	for i := range 200 { // 1.6 MB in 200 messages
		h.results.Add(bigResult("r-"+strings.Repeat("x", i), "s", 8<<10))
	}
	eventually(t, "the client counted as slow", func() bool {
		return metricValue(t, h.reg, "switchboard_ws_slow_client_disconnects_total") == 1
	})
	n, err := c.readToClose()
	wantClose(t, err, websocket.CloseTryAgainLater)
	if n >= 200 {
		t.Fatalf("read all %d results, want the close before the end", n)
	}
}

// A client's ping is answered without leaving a write deadline on the
// socket (gorilla's own handler leaves one a second away, after which
// every write to the client failed and it was dropped).
func TestPongLeavesNoWriteDeadline(t *testing.T) {
	deadlines := make(chan time.Time, 64)
	h := newHarness(t, withWriteDeadlines(deadlines))
	c := h.dial(nil)
	c.subscribe(`{"session_id":"s"}`)
	for len(deadlines) > 0 { // the handshake's
		<-deadlines
	}
	pong := make(chan struct{}, 1)
	c.conn.SetPongHandler(func(string) error { pong <- struct{}{}; return nil })
	if err := c.conn.WriteControl(websocket.PingMessage, []byte("p"), time.Now().Add(testTimeout)); err != nil {
		t.Fatal(err)
	}
	c.subscribe(`{"intent_ids":["after-ping"]}`) // answered after the pong: reading it reads the pong

	select {
	case <-pong:
	default:
		t.Fatal("no pong")
	}
	var last time.Time
	for len(deadlines) > 0 {
		last = <-deadlines
	}
	if !last.IsZero() {
		t.Fatalf("the pong left a write deadline %v on the socket", last)
	}
}
