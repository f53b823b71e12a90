package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/apitest"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// testTimeout bounds every wait in these tests: a failure, never a pace.
const testTimeout = 10 * time.Second

type harness struct {
	t       *testing.T
	clock   *clockwork.FakeClock
	pub     *apitest.Publisher
	results *api.Results
	reg     *prometheus.Registry
	srv     *api.Server
	ts      *httptest.Server
	bg      sync.WaitGroup // goroutines started by fake publishers
}

type harnessOpt func(*harnessSetup)

type harnessSetup struct {
	cfg         api.Config
	capacity    int
	opts        []api.Option
	sendBuffers int // SO_SNDBUF of accepted connections; 0: the system's
	deadlines   chan time.Time
}

func withConfig(f func(*api.Config)) harnessOpt { return func(h *harnessSetup) { f(&h.cfg) } }
func withCapacity(n int) harnessOpt             { return func(h *harnessSetup) { h.capacity = n } }
func withOption(o api.Option) harnessOpt        { return func(h *harnessSetup) { h.opts = append(h.opts, o) } }

// withSendBuffers makes the server's sockets buffer at most about n bytes
// (the kernel doubles it), so a client that stops reading fills them fast.
func withSendBuffers(n int) harnessOpt { return func(h *harnessSetup) { h.sendBuffers = n } }

// withWriteDeadlines sends every write deadline set on the server's
// sockets to c (dropping those c has no room for).
func withWriteDeadlines(c chan time.Time) harnessOpt {
	return func(h *harnessSetup) { h.deadlines = c }
}

// testListener sets SO_SNDBUF on every accepted connection, and records
// write deadlines.
type testListener struct {
	net.Listener
	n         int
	deadlines chan time.Time
}

func (l testListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, err
	}
	if l.n > 0 {
		_ = tc.SetWriteBuffer(l.n)
	}
	if l.deadlines != nil {
		return deadlineConn{tc, l.deadlines}, nil
	}
	return c, err
}

// deadlineConn is a TCP connection (non-blocking writes included) that
// reports its write deadlines.
type deadlineConn struct {
	*net.TCPConn
	deadlines chan time.Time
}

func (c deadlineConn) SetWriteDeadline(t time.Time) error {
	select {
	case c.deadlines <- t:
	default:
	}
	return c.TCPConn.SetWriteDeadline(t)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// newHarness serves a new Server on an httptest server, with a fake clock,
// a recording publisher and a fresh registry. Cleanup shuts it all down.
func newHarness(t *testing.T, hopts ...harnessOpt) *harness {
	t.Helper()
	setup := harnessSetup{cfg: api.Config{Listen: "127.0.0.1:0"}}
	for _, o := range hopts {
		o(&setup)
	}
	h := &harness{
		t:       t,
		clock:   clockwork.NewFakeClock(),
		pub:     &apitest.Publisher{},
		results: api.NewResults(setup.capacity),
		reg:     prometheus.NewRegistry(),
	}
	opts := append([]api.Option{
		api.WithClock(h.clock),
		api.WithLogger(discardLogger()),
		api.WithRegisterer(h.reg),
		api.WithGatherer(h.reg),
	}, setup.opts...)
	srv, err := api.New(setup.cfg, h.pub, h.results, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.srv = srv
	h.ts = httptest.NewUnstartedServer(srv.Handler())
	if setup.sendBuffers > 0 || setup.deadlines != nil {
		h.ts.Listener = testListener{h.ts.Listener, setup.sendBuffers, setup.deadlines}
	}
	h.ts.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		h.ts.Close()
		h.bg.Wait()
	})
	return h
}

// do sends a request and returns the response with its body read.
func (h *harness) do(method, path, body string) (*http.Response, []byte) {
	h.t.Helper()
	return h.doCtx(context.Background(), method, path, body)
}

func (h *harness) doCtx(ctx context.Context, method, path, body string) (*http.Response, []byte) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, testTimeout)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.ts.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.ts.Client().Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return resp, b
}

type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
	} `json:"error"`
}

// wantError checks a JSON error response.
func wantError(t *testing.T, resp *http.Response, body []byte, status int, code, field string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json", ct)
	}
	var e apiError
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body is not JSON: %v: %s", err, body)
	}
	if e.Error.Code != code || e.Error.Field != field || e.Error.Message == "" {
		t.Fatalf("error = %+v, want code %q field %q and a message", e.Error, code, field)
	}
}

func decode[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decode %T: %v: %s", v, err, body)
	}
	return v
}

// metricValue sums the samples of a counter or gauge family in reg.
func metricValue(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			}
		}
	}
	return sum
}

// eventually polls cond (like testify's Eventually) until it holds, failing
// the test after testTimeout.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		case <-poll.C:
		}
	}
}

// result builds a stored result.
func result(id, intentType, session string) *schemas.IntentResult {
	r := &schemas.IntentResult{
		IntentID:   id,
		IntentType: intentType,
		Agent:      "agent-a",
		Outcome:    schemas.OutcomeAnswered,
		Answer:     schemas.Ptr(schemas.JSON(`{"ok":true}`)),
		Attempts:   1,
		Timeline:   schemas.Timeline{ReceivedAt: 1, ResolvedAt: 2, Deadline: 3},
	}
	if session != "" {
		r.SessionID = schemas.Ptr(session)
	}
	return r
}

// --- WebSocket client helpers ---

type serverMsg struct {
	Type          string                  `json:"type"`
	Cursor        string                  `json:"cursor"`
	Result        *schemas.IntentResult   `json:"result"`
	Timeout       *schemas.IntentTimeout  `json:"timeout"`
	Progress      *schemas.IntentProgress `json:"progress"`
	Replayed      int                     `json:"replayed"`
	Subscriptions json.RawMessage         `json:"subscriptions"`
	Subscription  json.RawMessage         `json:"subscription"`
	Error         *struct {
		Code     string `json:"code"`
		Message  string `json:"message"`
		Earliest string `json:"earliest"`
	} `json:"error"`
}

type wsClient struct {
	t    *testing.T
	conn *websocket.Conn
	n    int // barrier counter
}

func (h *harness) dial(hdr http.Header) *wsClient {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	url := "ws" + strings.TrimPrefix(h.ts.URL, "http") + "/v1/stream"
	conn, resp, err := websocket.DefaultDialer.DialContext(ctx, url, hdr)
	if err != nil {
		var body []byte
		if resp != nil {
			body, _ = io.ReadAll(resp.Body)
		}
		h.t.Fatalf("dial: %v %s", err, body)
	}
	c := &wsClient{t: h.t, conn: conn}
	h.t.Cleanup(func() { _ = conn.Close() })
	return c
}

func (c *wsClient) sendText(s string) {
	c.t.Helper()
	if err := c.conn.WriteMessage(websocket.TextMessage, []byte(s)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *wsClient) read() serverMsg {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(testTimeout))
	typ, b, err := c.conn.ReadMessage()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	if typ != websocket.TextMessage {
		c.t.Fatalf("message type %d, want text", typ)
	}
	var m serverMsg
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		c.t.Fatalf("server message %s: %v", b, err)
	}
	return m
}

func (c *wsClient) expect(typ string) serverMsg {
	c.t.Helper()
	m := c.read()
	if m.Type != typ {
		c.t.Fatalf("got %q message %+v, want %q", m.Type, m, typ)
	}
	return m
}

func (c *wsClient) subscribe(sub string) {
	c.t.Helper()
	c.sendText(`{"subscribe":` + sub + `}`)
	c.expect("subscribed")
}

// barrier proves that nothing was queued for the client before now: it
// subscribes to an intent id no result has, and the next message must be
// the acknowledgement (the server sends in order).
func (c *wsClient) barrier() {
	c.t.Helper()
	c.n++
	id := "barrier-" + strings.Repeat("x", c.n)
	c.sendText(`{"subscribe":{"intent_ids":["` + id + `"]}}`)
	m := c.read()
	if m.Type != "subscribed" || !strings.Contains(string(m.Subscription), id) {
		c.t.Fatalf("before the barrier's ack got %q message %+v (result %+v)", m.Type, m, m.Result)
	}
	c.sendText(`{"unsubscribe":{"intent_ids":["` + id + `"]}}`)
	c.expect("unsubscribed")
}

// mustNotBlock runs f and fails the test if it does not return promptly.
func mustNotBlock(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(testTimeout):
		t.Fatalf("%s blocked", what)
	}
}

func httptestRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

func mustRequest(t *testing.T, method, path string) *http.Request {
	t.Helper()
	return httptest.NewRequest(method, path, nil)
}

// blockUntilWaiting returns once the published-th request has been
// published and a timer waits on the clock: a ?wait request's. (The body's
// read timer, started earlier, has stopped by then: the body is read
// before the request is published.)
func (h *harness) blockUntilWaiting(ctx context.Context, published int) error {
	h.t.Helper()
	eventually(h.t, "the request published", func() bool { return len(h.pub.Requests()) >= published })
	return h.clock.BlockUntilContext(ctx, 1)
}
