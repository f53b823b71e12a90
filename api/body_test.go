package api_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/api"
)

// rawConn is a client that writes requests by hand, to send bodies slowly.
type rawConn struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
}

func (h *harness) rawDial() *rawConn {
	h.t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(h.ts.URL, "http://"), testTimeout)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = conn.Close() })
	return &rawConn{t: h.t, conn: conn, br: bufio.NewReader(conn)}
}

func (c *rawConn) write(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.conn, s); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// response reads the next response (failing after testTimeout: a server
// that waits for the rest of the body never answers).
func (c *rawConn) response() (*http.Response, string) {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(testTimeout))
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		c.t.Fatalf("no response: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("reading the response body: %v", err)
	}
	return resp, string(b)
}

// closed checks that the server closed the connection after its answer (a
// reset, if it closed with bytes of ours unread).
func (c *rawConn) closed() {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(testTimeout))
	if n, err := c.br.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		c.t.Fatalf("after the answer: read %d bytes, %v; want the connection closed", n, err)
	}
}

// head is the start of a POST declaring a body of n bytes.
func head(auth string, n string) string {
	s := "POST /v1/intents HTTP/1.1\r\nHost: switchboard\r\nContent-Type: application/json\r\nContent-Length: " + n + "\r\n"
	if auth != "" {
		s += "Authorization: Bearer " + auth + "\r\n"
	}
	return s + "\r\n"
}

// Finding 6: a client that declares 100 KB and sends a byte a second is cut
// off at the body read timeout (on the injected clock) with 408, and the
// connection is closed.
func TestSlowBodyIsCutOffAtTheReadTimeout(t *testing.T) {
	h := newHarness(t, withAuth(nil), withConfig(func(c *api.Config) { c.BodyReadTimeout = 10 * time.Second }))
	c := h.rawDial()
	c.write(head(keyAcme, "100000") + `{`)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := h.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("no read timer started: %v", err)
	}
	for range 9 { // a byte a second, for 9 seconds: still in time
		c.write(" ")
		h.clock.Advance(time.Second)
	}
	c.write(" ")
	h.clock.Advance(time.Second)
	resp, body := c.response()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, `"body_timeout"`) || !resp.Close {
		t.Fatalf("got %d (close %v) %s, want 408 body_timeout and Connection: close", resp.StatusCode, resp.Close, body)
	}
	c.closed()
	if n := len(h.pub.Requests()); n != 0 {
		t.Fatalf("published %d requests", n)
	}
}

// Finding 6: a client without a credential gets its 401 at once, without
// the server waiting for the body it declared, and the connection closes.
func TestRefusalDoesNotWaitForTheBody(t *testing.T) {
	h := newHarness(t, withAuth(nil))
	c := h.rawDial()
	c.write(head("", "100000") + `{"intent_type":`)
	resp, body := c.response()
	if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
		t.Fatalf("got %d (close %v) %s, want 401 and Connection: close", resp.StatusCode, resp.Close, body)
	}
	c.closed()

	// Nor does an answer that needs no body (no such route), nor a body
	// declared over the limit.
	c = h.rawDial()
	c.write(strings.Replace(head(keyAcme, "100000"), "/v1/intents", "/v1/nowhere", 1) + `{`)
	if resp, body := c.response(); resp.StatusCode != http.StatusNotFound || !resp.Close {
		t.Fatalf("got %d (close %v) %s, want 404 and Connection: close", resp.StatusCode, resp.Close, body)
	}
	c.closed()
	c = h.rawDial()
	c.write(head(keyAcme, "2000000") + `{`)
	if resp, body := c.response(); resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close {
		t.Fatalf("got %d (close %v) %s, want 413 and Connection: close", resp.StatusCode, resp.Close, body)
	}
	c.closed()
}

// A body read whole keeps the connection, and stops the read timer: a ?wait
// request then holds its answer past the body read timeout.
func TestWholeBodyKeepsTheConnectionAndTheWait(t *testing.T) {
	h := newHarness(t, withAuth(nil), withConfig(func(c *api.Config) { c.BodyReadTimeout = 10 * time.Second }))
	c := h.rawDial()
	body := `{"intent_id":"w-1","intent_type":"echo","payload":{}}`
	c.write(strings.Replace(head(keyAcme, "53"), "/v1/intents", "/v1/intents?wait=60s", 1) + body)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := h.blockUntilWaiting(ctx, 1); err != nil {
		t.Fatalf("the request never started waiting: %v", err)
	}
	h.clock.Advance(30 * time.Second)
	h.results.Add(tenantResult("w-1", "acme", ""))
	resp, got := c.response()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("got %d (close %v) %s, want 200 on a kept connection", resp.StatusCode, resp.Close, got)
	}
	c.write(strings.Replace(head(keyAcme, "53"), "w-1", "w-2", 1) + strings.Replace(body, "w-1", "w-2", 1))
	if resp, got := c.response(); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("second request on the connection: %d %s", resp.StatusCode, got)
	}
}
