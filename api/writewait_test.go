package api_test

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/apitest"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// stalledClient sends request on a connection of its own with a small
// receive buffer, and never reads the answer.
func stalledClient(t *testing.T, h *harness, request string) {
	t.Helper()
	c, err := net.Dial("tcp", h.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte(request)); err != nil {
		t.Fatal(err)
	}
}

// untilWriteWaitEnds advances the fake clock by the write wait until cond
// holds: a write blocked on a client that stops reading has its timer
// armed on that clock.
func untilWriteWaitEnds(t *testing.T, h *harness, what string, cond func() bool) {
	t.Helper()
	eventually(t, what, func() bool {
		if cond() {
			return true
		}
		h.clock.Advance(api.DefaultWriteWait)
		return false
	})
}

// An event stream whose client stops reading ends once a write has waited
// write_wait, and gives its stream slot back: with max_connections 1 a
// second stream is refused while the first holds it, and served after. It
// did not end by the watch's overflow (its bounds are far away).
func TestEventsStreamWriteWait(t *testing.T) {
	h, log := resumeHarness(t, 1, withSendBuffers(4096), withConfig(func(c *api.Config) {
		c.MaxConnections = 1
		c.SendQueue = 4096
		c.SendQueueBytes = 64 << 20
	}))
	stalledClient(t, h, "GET /v1/intents/w-1/events HTTP/1.1\r\nHost: switchboard\r\n\r\n")
	waitStreams(t, h, 1)
	if resp, b := h.do("GET", "/v1/intents/w-2/events", ""); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a second stream while the first holds the slot: %d %s", resp.StatusCode, b)
	}
	for seq := int64(1); seq <= 256; seq++ { // of 16 KiB: 4 MiB, past the sockets' buffers
		log.AppendProgress(bigChunk(seq, 16<<10))
	}
	untilWriteWaitEnds(t, h, "the stalled stream ended", func() bool {
		return metricValue(t, h.reg, "switchboard_sse_streams") == 0
	})
	if got := apitest.CounterWith(t, h.reg, "switchboard_api_write_timeouts_total", "route", "/v1/intents/{id}/events"); got != 1 {
		t.Fatalf("write timeouts of the events route = %v, want 1", got)
	}
	if events, bytes := h.results.WatchOverflows(); events != 0 || bytes != 0 {
		t.Fatalf("overflows %d, %d: the stream should have ended by the write wait", events, bytes)
	}
	c := h.sse("GET", "/v1/intents/w-2/events", "", nil)
	if c.resp.StatusCode != http.StatusOK {
		t.Fatalf("a stream after the slot came back: %d", c.resp.StatusCode)
	}
}

// A ?wait answer (a large result) to a client that stops reading ends once
// its write has waited write_wait, and gives the wait slot back.
func TestWaitAnswerWriteWait(t *testing.T) {
	h, reg := newWaitLimitHarness(t, 1, 1, withSendBuffers(4096))
	body := `{"intent_id":"w-1","intent_type":"echo","payload":{}}`
	stalledClient(t, h, "POST /v1/intents?wait=30s HTTP/1.1\r\nHost: switchboard\r\nContent-Type: application/json\r\n"+
		"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := h.blockUntilWaiting(ctx, 1); err != nil {
		t.Fatal(err)
	}
	waitingIs(t, reg, 1)
	res := result("w-1", "echo", "")
	res.Answer = schemas.Ptr(schemas.JSON(`"` + strings.Repeat("x", 4<<20) + `"`))
	h.results.Add(res)
	untilWriteWaitEnds(t, h, "the stalled answer ended", func() bool {
		return metricValue(t, reg, "switchboard_api_waiting_callers") == 0
	})
	if got := apitest.CounterWith(t, h.reg, "switchboard_api_write_timeouts_total", "route", "/v1/intents"); got != 1 {
		t.Fatalf("write timeouts of POST /v1/intents = %v, want 1", got)
	}
}
