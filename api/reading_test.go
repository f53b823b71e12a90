package api_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/apitest"
)

// intentOf is an intent's JSON of exactly n bytes.
func intentOf(t *testing.T, id string, n int) string {
	t.Helper()
	s := fmt.Sprintf(`{"intent_id":%q,"intent_type":"echo","payload":{"pad":""}}`, id)
	if len(s) > n {
		t.Fatalf("an intent of %d bytes is too short", n)
	}
	return strings.Replace(s, `""`, `"`+strings.Repeat("x", n-len(s))+`"`, 1)
}

// readingBytes waits until the bodies being read reserve want bytes.
func (h *harness) readingBytes(want float64) {
	h.t.Helper()
	eventually(h.t, fmt.Sprintf("%v bytes being read", want), func() bool {
		return metricValue(h.t, h.reg, "switchboard_api_reading_bytes") == want
	})
}

// wantReadingRefusal checks a refusal for reading: 503 overloaded with
// Retry-After and Connection: close, naming key, and the connection closed
// although the body was never sent whole.
func wantReadingRefusal(t *testing.T, c *rawConn, key string) {
	t.Helper()
	resp, body := c.response()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || !resp.Close ||
		!strings.Contains(body, `"code":"overloaded"`) || !strings.Contains(body, `"reason":"reading"`) || !strings.Contains(body, key+",") {
		t.Fatalf("got %d (Retry-After %q, close %v) %s; want 503 overloaded, reason reading, naming %s, Retry-After: 1, Connection: close",
			resp.StatusCode, resp.Header.Get("Retry-After"), resp.Close, body, key)
	}
	c.closed()
}

// Slow senders each holding part of a body reserve what they declared: the
// next one past a tenant's share, or the instance's bound, is refused at
// once without its body being read, and a reservation is released when its
// body has been read (the intent answered), when its read times out (408)
// and when its client goes away.
func TestSlowSendersAreBoundedInBytes(t *testing.T) {
	h := newHarness(t, withAuth(nil), withConfig(func(c *api.Config) {
		c.BodyReadTimeout = 10 * time.Second
		c.MaxReadingBytes = 4000 // 2000 a tenant
	}))
	acme := []*rawConn{h.rawDial(), h.rawDial()}
	for _, c := range acme {
		c.write(head(keyAcme, "1000") + `{`)
	}
	h.readingBytes(2000)
	c := h.rawDial()
	c.write(head(keyAcme, "1000") + `{`)
	wantReadingRefusal(t, c, "http.max_reading_bytes_per_tenant")

	// Another tenant still has its share; past it, the instance's bound.
	globex := []*rawConn{h.rawDial(), h.rawDial()}
	for _, c := range globex {
		c.write(head(keyGlobex, "1000") + `{`)
	}
	h.readingBytes(4000)
	c = h.rawDial()
	c.write(head(keyGlobex, "10") + `{`)
	wantReadingRefusal(t, c, "http.max_reading_bytes")
	// Every path that reads a body is refused the same way (cancel's reason,
	// the MCP endpoint).
	c = h.rawDial()
	c.write(strings.Replace(head(keyGlobex, "10"), "POST /v1/intents", "DELETE /v1/intents/x-1", 1) + `{`)
	wantReadingRefusal(t, c, "http.max_reading_bytes")
	c = h.rawDial()
	c.write(strings.Replace(head(keyGlobex, "10"), "/v1/intents", api.MCPPath, 1) + `{`)
	wantReadingRefusal(t, c, "http.max_reading_bytes")
	if got := metricValue(t, h.reg, "switchboard_api_admission_refused_total"); got != 4 {
		t.Fatalf("refused_total = %v, want 4", got)
	}

	// A body read whole releases its reservation at once.
	acme[0].write(intentOf(t, "r-1", 1000)[1:])
	if resp, body := acme[0].response(); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the whole body: %d %s", resp.StatusCode, body)
	}
	h.readingBytes(3000)
	// A client that goes away releases its own.
	_ = globex[0].conn.Close()
	h.readingBytes(2000)
	// The body read timeout releases the rest (408).
	h.clock.Advance(10 * time.Second)
	for _, c := range []*rawConn{acme[1], globex[1]} {
		if resp, body := c.response(); resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("a body past its read timeout: %d %s", resp.StatusCode, body)
		}
	}
	h.readingBytes(0)
	if n := len(h.pub.Requests()); n != 1 {
		t.Fatalf("published %d requests, want 1", n)
	}
}

// A body read whole releases its reservation then, not when the request
// ends: a ?wait request holds nothing of the reading budget while it waits.
func TestWaitingRequestHoldsNoReadingBytes(t *testing.T) {
	h := newHarness(t, withAuth(nil))
	c := h.rawDial()
	c.write(strings.Replace(head(keyAcme, "200"), "/v1/intents", "/v1/intents?wait=60s", 1) + intentOf(t, "w-1", 200))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := h.blockUntilWaiting(ctx, 1); err != nil {
		t.Fatalf("the request never started waiting: %v", err)
	}
	h.readingBytes(0)
	h.results.Add(tenantResult("w-1", "acme", ""))
	if resp, body := c.response(); resp.StatusCode != http.StatusOK {
		t.Fatalf("got %d %s", resp.StatusCode, body)
	}
}

// A request whose handler never reads its body (an event stream) holds its
// reservation no longer than the body read timeout.
func TestUnreadBodyIsReleasedAtTheReadTimeout(t *testing.T) {
	h := newHarness(t, withAuth(nil), withConfig(func(c *api.Config) { c.BodyReadTimeout = 10 * time.Second }))
	c := h.rawDial()
	c.write(strings.Replace(head(keyAcme, "1000"), "POST /v1/intents", "GET /v1/intents/e-1/events", 1) + `{`)
	h.readingBytes(1000)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := h.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("no read timer started: %v", err)
	}
	h.clock.Advance(10 * time.Second)
	h.readingBytes(0)
}

// A body of unknown length (chunked) reserves Config.MaxBodyBytes.
func TestChunkedBodyReservesTheBodyLimit(t *testing.T) {
	h := newHarness(t, withAuth(nil), withConfig(func(c *api.Config) {
		c.MaxBodyBytes = 3000
		c.MaxReadingBytes = 5000 // 2500 a tenant
	}))
	c := h.rawDial()
	c.write("POST /v1/intents HTTP/1.1\r\nHost: switchboard\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nAuthorization: Bearer " + keyAcme + "\r\n\r\n1\r\n{\r\n")
	h.readingBytes(3000)
	// The tenant's share is full however little the next one declares.
	next := h.rawDial()
	next.write(head(keyAcme, "1") + `{`)
	wantReadingRefusal(t, next, "http.max_reading_bytes_per_tenant")
	_ = c.conn.Close()
	h.readingBytes(0)
}

// http.max_connections: the listener holds at most MaxHTTPConnections
// connections; one more is closed at once, unanswered, and counted, and a
// closed one makes room again.
func TestListenerBoundsConnections(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv, err := api.New(api.Config{Listen: "127.0.0.1:0", MaxHTTPConnections: 2}, &apitest.Publisher{}, api.NewResults(0),
		api.WithClock(clockwork.NewFakeClock()), api.WithLogger(discardLogger()), api.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := startRun(ctx, t, srv)
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	dial := func() (net.Conn, *bufio.Reader) {
		conn, err := net.DialTimeout("tcp", srv.Addr(), testTimeout)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		_ = conn.SetDeadline(time.Now().Add(testTimeout))
		return conn, bufio.NewReader(conn)
	}
	healthz := func(conn net.Conn, br *bufio.Reader) error {
		if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: switchboard\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("healthz: %d", resp.StatusCode)
		}
		return nil
	}
	first, br := dial()
	if err := healthz(first, br); err != nil {
		t.Fatal(err)
	}
	second, br2 := dial()
	if err := healthz(second, br2); err != nil {
		t.Fatal(err)
	}
	if got := metricValue(t, reg, "switchboard_api_connections"); got != 2 {
		t.Fatalf("switchboard_api_connections = %v, want 2", got)
	}
	third, br3 := dial()
	if _, err := br3.ReadByte(); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("connection 3 of 2: %v; want it closed at once, unanswered", err)
	}
	_ = third.Close()
	if got := metricValue(t, reg, "switchboard_api_admission_refused_total"); got != 1 {
		t.Fatalf("refused_total = %v, want 1 (reason connections)", got)
	}
	// The kept connections still serve; one closed makes room.
	if err := healthz(second, br2); err != nil {
		t.Fatal(err)
	}
	_ = first.Close()
	eventually(t, "a connection served after one closed", func() bool {
		c, br := dial()
		defer func() { _ = c.Close() }()
		return healthz(c, br) == nil
	})
}
