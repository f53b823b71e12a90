package mcp_test

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/apitest"
	"github.com/switchboard-mcp/switchboard/api/mcp"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// subscribed is a ProgressSource that says which intents were subscribed
// to, once they are.
type subscribed struct {
	mcp.ProgressSource
	subd chan string
}

func (s subscribed) SubscribeProgress(tenant, id string, f func(mcp.Progress)) func() {
	stop := s.ProgressSource.SubscribeProgress(tenant, id, f)
	s.subd <- id
	return stop
}

// A 2025-11-25 session's tools/call streaming progress (answered as SSE on
// its POST) to a client that stops reading: the write the client does not
// take ends after write_wait, the call stops waiting long before its
// deadline, its wait slot comes back (the progress subscription's stop no
// longer waits on a stuck write), and its intent goes on (no cancel).
func TestCallStreamWriteWait(t *testing.T) {
	reg := prometheus.NewRegistry()
	limit, err := api.NewWaitLimit(api.WaitLimitConfig{Max: 1}, reg)
	if err != nil {
		t.Fatal(err)
	}
	subd := make(chan string, 1)
	h := newHarnessWith(t, nil, func(c *mcp.Config) {
		c.WaitLimit = limit
		c.ResultGrace = 24 * time.Hour // the call's own deadline is far away
		c.Progress = subscribed{ProgressSource: mcp.WatchProgress{Results: c.Results, MaxBytes: 64 << 20}, subd: subd}
	})
	sid := h.session(keyAcme)

	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{},"_meta":{"progressToken":"p1"}}}`
	conn, err := net.Dial("tcp", h.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if err := conn.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("POST /mcp HTTP/1.1\r\nHost: " + h.ts.Listener.Addr().String() + "\r\nAuthorization: Bearer " + keyAcme +
		"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: " + sid +
		"\r\nMcp-Protocol-Version: 2025-11-25\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)); err != nil {
		t.Fatal(err)
	}
	var id string
	select {
	case id = <-subd:
	case <-time.After(testTimeout):
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		b := make([]byte, 4096)
		n, _ := conn.Read(b)
		t.Fatalf("the call did not subscribe to its progress: %q", b[:n])
	}
	waitFor(t, func() bool { return gauge(t, reg) == 1 })

	start := h.clock.Now()
	acme, big := "acme", strings.Repeat("x", 64<<10)
	for seq := int64(1); seq <= 200; seq++ { // 12.5 MiB, past the sockets' buffers
		h.results.AddProgress(0, seq, &schemas.IntentProgress{
			IntentID: id, IntentType: "slow", Agent: "slow", Tenant: &acme, Sequence: seq, Message: &big,
		})
	}
	waitFor(t, func() bool {
		if gauge(t, reg) == 0 {
			return true
		}
		h.clock.Advance(api.DefaultWriteWait)
		return false
	})
	if waited := h.clock.Since(start); waited >= time.Hour {
		t.Fatalf("the slot came back after %v of the call's 24 h wait", waited)
	}
	if n := apitest.CounterWith(t, h.reg, "switchboard_api_write_timeouts_total", "route", api.MCPPath); n != 1 {
		t.Fatalf("write timeouts of /mcp = %v, want 1", n)
	}
	if c := h.pub.Cancels(); len(c) != 0 {
		t.Fatalf("the intent was cancelled: %+v", c)
	}
}
