package api_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/apitest"
	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/schemas"
)

type acceptedBody struct {
	IntentID string `json:"intent_id"`
	Status   string `json:"status"`
}

func TestSubmitWithoutWaitAnswers202AndPublishesAValidRequest(t *testing.T) {
	h := newHarness(t)
	resp, body := h.do("POST", "/v1/intents",
		`{"intent_type":"fraud_check","payload":{"amount":12},"session_id":"s-1","timeout_ms":500}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status = %d, want 202: %s", resp.StatusCode, body)
	}
	got := decode[acceptedBody](t, body)
	if got.IntentID == "" || got.Status != "" {
		t.Fatalf("body = %s, want just an intent_id", body)
	}
	if loc := resp.Header.Get("Location"); loc != "/v1/intents/"+got.IntentID {
		t.Fatalf("Location = %q, want /v1/intents/%s", loc, got.IntentID)
	}
	reqs := h.pub.Requests()
	if len(reqs) != 1 {
		t.Fatalf("published %d requests, want 1", len(reqs))
	}
	req := reqs[0]
	if err := intents.Validate(req); err != nil {
		t.Fatalf("published an invalid request: %v", err)
	}
	if req.IntentID != got.IntentID || req.IntentType != "fraud_check" || req.Payload != `{"amount":12}` ||
		req.SessionID == nil || *req.SessionID != "s-1" || req.TimeoutMs == nil || *req.TimeoutMs != 500 {
		t.Fatalf("published %+v", req)
	}
	if req.CreatedAt == nil || *req.CreatedAt != h.clock.Now().UnixMilli() {
		t.Fatalf("created_at = %v, want the clock's %d", req.CreatedAt, h.clock.Now().UnixMilli())
	}
	if req.IntentID[14] != '7' {
		t.Fatalf("generated id %q is not a v7 UUID", req.IntentID)
	}
}

func TestSubmitKeepsTheCallersIntentIDAndTraceparent(t *testing.T) {
	h := newHarness(t)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req, _ := http.NewRequest("POST", h.ts.URL+"/v1/intents", strings.NewReader(`{"intent_id":"my-id-1","intent_type":"echo","payload":"hi"}`))
	req.Header.Set("Traceparent", tp)
	resp, err := h.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("Location") != "/v1/intents/my-id-1" {
		t.Fatalf("status %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	got := h.pub.Requests()[0]
	if got.IntentID != "my-id-1" || got.Traceparent == nil || *got.Traceparent != tp || got.Payload != `"hi"` {
		t.Fatalf("published %+v", got)
	}
}

func TestSubmitWithWaitAnswersWithTheResult(t *testing.T) {
	h := newHarness(t)
	// The result comes back from another goroutine, possibly before the
	// publisher has even returned.
	h.pub.Func = func(_ context.Context, req *schemas.IntentRequest) error {
		res := apitest.Result(req, `{"verdict":"clean"}`)
		h.bg.Go(func() { h.results.Add(res) })
		return nil
	}
	resp, body := h.do("POST", "/v1/intents?wait=30s", `{"intent_type":"fraud_check","payload":{}}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d, want 200: %s", resp.StatusCode, body)
	}
	res := decode[schemas.IntentResult](t, body)
	id := h.pub.Requests()[0].IntentID
	if res.IntentID != id || res.Outcome != schemas.OutcomeAnswered || res.Answer == nil || *res.Answer != `{"verdict":"clean"}` {
		t.Fatalf("result = %+v", res)
	}
}

func TestSubmitWithWaitAnswersAtOnceWhenTheResultIsKnown(t *testing.T) {
	h := newHarness(t)
	h.results.Add(result("known-1", "echo", ""))
	resp, body := h.do("POST", "/v1/intents?wait=10s", `{"intent_id":"known-1","intent_type":"echo","payload":{}}`)
	if resp.StatusCode != http.StatusOK || decode[schemas.IntentResult](t, body).IntentID != "known-1" {
		t.Fatalf("status = %d: %s", resp.StatusCode, body)
	}
}

func TestSubmitWithWaitExpiresOnTheClock(t *testing.T) {
	for _, tc := range []struct {
		name    string
		wait    string
		maxWait time.Duration
		advance time.Duration
	}{
		{"wait", "5s", 0, 5 * time.Second},
		{"capped by MaxWait", "1h", 2 * time.Second, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, withConfig(func(c *api.Config) { c.MaxWait = tc.maxWait }))
			type answer struct {
				resp *http.Response
				body []byte
			}
			done := make(chan answer, 1)
			go func() {
				resp, body := h.do("POST", "/v1/intents?wait="+tc.wait, `{"intent_type":"echo","payload":{}}`)
				done <- answer{resp, body}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			if err := h.blockUntilWaiting(ctx, 1); err != nil { // the request's deadline timer
				t.Fatalf("the request never started waiting: %v", err)
			}
			select {
			case a := <-done:
				t.Fatalf("answered before the wait ended: %d %s", a.resp.StatusCode, a.body)
			default:
			}
			h.clock.Advance(tc.advance)
			var a answer
			select {
			case a = <-done:
			case <-ctx.Done():
				t.Fatal("no answer after the wait ended")
			}
			if a.resp.StatusCode != http.StatusAccepted {
				t.Fatalf("status = %d, want 202: %s", a.resp.StatusCode, a.body)
			}
			got := decode[acceptedBody](t, a.body)
			if got.Status != "pending" || got.IntentID != h.pub.Requests()[0].IntentID {
				t.Fatalf("body = %s", a.body)
			}
			if a.resp.Header.Get("Location") != "/v1/intents/"+got.IntentID {
				t.Fatalf("Location = %q", a.resp.Header.Get("Location"))
			}
		})
	}
}

func TestSubmitRejectsBadRequests(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		status           int
		code, field      string
	}{
		{"missing intent_type", "/v1/intents", `{"payload":{}}`, 400, "invalid_intent", "intent_type"},
		{"bad intent_type", "/v1/intents", `{"intent_type":"Fraud Check","payload":{}}`, 400, "invalid_intent", "intent_type"},
		{"missing payload", "/v1/intents", `{"intent_type":"echo"}`, 400, "invalid_intent", "payload"},
		{"timeout_ms out of range", "/v1/intents", `{"intent_type":"echo","payload":{},"timeout_ms":0}`, 400, "invalid_intent", "timeout_ms"},
		{"timeout_ms a string", "/v1/intents", `{"intent_type":"echo","payload":{},"timeout_ms":"5"}`, 400, "invalid_intent", "timeout_ms"},
		{"unknown field", "/v1/intents", `{"intent_type":"echo","payload":{},"intnet_id":"x"}`, 400, "invalid_intent", "intnet_id"},
		{"bad JSON", "/v1/intents", `{"intent_type":`, 400, "invalid_json", ""},
		{"not JSON", "/v1/intents", `intent_type=echo`, 400, "invalid_json", ""},
		{"empty body", "/v1/intents", ``, 400, "invalid_json", ""},
		{"array", "/v1/intents", `[1]`, 400, "invalid_json", ""},
		{"two objects", "/v1/intents", `{"intent_type":"echo","payload":{}} {}`, 400, "invalid_json", ""},
		{"wait without unit", "/v1/intents?wait=5", `{"intent_type":"echo","payload":{}}`, 400, "invalid_parameter", "wait"},
		{"negative wait", "/v1/intents?wait=-1s", `{"intent_type":"echo","payload":{}}`, 400, "invalid_parameter", "wait"},
		{"empty wait", "/v1/intents?wait=", `{"intent_type":"echo","payload":{}}`, 400, "invalid_parameter", "wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			resp, body := h.do("POST", tc.path, tc.body)
			wantError(t, resp, body, tc.status, tc.code, tc.field)
			if n := len(h.pub.Requests()); n != 0 {
				t.Fatalf("published %d requests", n)
			}
		})
	}
}

func TestSubmitRejectsAnOversizedBodyWith413(t *testing.T) {
	h := newHarness(t, withConfig(func(c *api.Config) { c.MaxBodyBytes = 1024 }))
	body := `{"intent_type":"echo","payload":"` + strings.Repeat("x", 2048) + `"}`
	resp, b := h.do("POST", "/v1/intents", body)
	wantError(t, resp, b, http.StatusRequestEntityTooLarge, "body_too_large", "")
	if n := len(h.pub.Requests()); n != 0 {
		t.Fatalf("published %d requests", n)
	}
}

func TestSubmitAnswers503WhenThePublisherFails(t *testing.T) {
	h := newHarness(t)
	h.pub.Func = func(context.Context, *schemas.IntentRequest) error { return errors.New("broker down") }
	resp, body := h.do("POST", "/v1/intents?wait=1s", `{"intent_type":"echo","payload":{}}`)
	wantError(t, resp, body, http.StatusServiceUnavailable, "unavailable", "")
	if strings.Contains(string(body), "broker down") {
		t.Fatalf("the publisher's error leaked to the client: %s", body)
	}
}

func TestGetIntent(t *testing.T) {
	h := newHarness(t)
	h.results.Add(result("i-1", "echo", "s-1"))

	resp, body := h.do("GET", "/v1/intents/i-1", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d: %s", resp.StatusCode, body)
	}
	res := decode[schemas.IntentResult](t, body)
	if res.IntentID != "i-1" || res.SessionID == nil || *res.SessionID != "s-1" || *res.Answer != `{"ok":true}` {
		t.Fatalf("result = %+v", res)
	}

	resp, body = h.do("GET", "/v1/intents/nope", "")
	wantError(t, resp, body, http.StatusNotFound, "not_found", "")
}

func TestUnknownRouteAndWrongMethodAreJSON(t *testing.T) {
	h := newHarness(t)
	resp, body := h.do("GET", "/v2/nothing", "")
	wantError(t, resp, body, http.StatusNotFound, "not_found", "")

	resp, body = h.do("PUT", "/v1/intents/i-1", "")
	wantError(t, resp, body, http.StatusMethodNotAllowed, "method_not_allowed", "")
	if allow := resp.Header.Get("Allow"); allow != "GET, DELETE" {
		t.Fatalf("Allow = %q, want GET, DELETE", allow)
	}
	resp, body = h.do("GET", "/v1/intents", "")
	wantError(t, resp, body, http.StatusMethodNotAllowed, "method_not_allowed", "")
	if allow := resp.Header.Get("Allow"); allow != "POST" {
		t.Fatalf("Allow = %q, want POST", allow)
	}
}

func TestPanicBecomesA500JSONError(t *testing.T) {
	h := newHarness(t)
	rec := httptestRecorder()
	api.Middleware(h.srv, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("boom")
	})).ServeHTTP(rec, mustRequest(t, "GET", "/boom"))
	resp := rec.Result()
	wantError(t, resp, rec.Body.Bytes(), http.StatusInternalServerError, "internal", "")
	if n := metricValue(t, h.reg, "switchboard_api_requests_total"); n != 1 {
		t.Fatalf("requests_total = %v, want 1", n)
	}
}

func TestHealthReadinessAndMetrics(t *testing.T) {
	notReady := errors.New("kafka: no brokers reachable")
	ready := make(chan error, 1)
	ready <- notReady
	h := newHarness(t, withOption(api.WithReadiness(func() error {
		err := <-ready
		ready <- err
		return err
	})))

	resp, body := h.do("GET", "/healthz", "")
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != `{"status":"ok"}` {
		t.Fatalf("healthz: %d %s", resp.StatusCode, body)
	}

	resp, body = h.do("GET", "/readyz", "")
	wantError(t, resp, body, http.StatusServiceUnavailable, "not_ready", "")
	if !strings.Contains(string(body), "no brokers reachable") {
		t.Fatalf("readyz does not say why: %s", body)
	}
	if prev := <-ready; prev == nil {
		t.Fatal("readiness was not the error the test set")
	}
	ready <- nil
	resp, body = h.do("GET", "/readyz", "")
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != `{"status":"ready"}` {
		t.Fatalf("readyz: %d %s", resp.StatusCode, body)
	}

	resp, body = h.do("GET", "/metrics", "")
	if resp.StatusCode != 200 {
		t.Fatalf("metrics: %d", resp.StatusCode)
	}
	for _, want := range []string{
		`switchboard_api_requests_total{code="200",route="/healthz"} 1`,
		`switchboard_api_requests_total{code="503",route="/readyz"} 1`,
		`switchboard_api_request_duration_seconds_bucket{route="/readyz"`,
		`switchboard_ws_connections 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	resp, body = h.do("GET", "/readyz", "")
	wantError(t, resp, body, http.StatusServiceUnavailable, "not_ready", "")
}

func TestShutdownEndsPendingWaitsWith202(t *testing.T) {
	h := newHarness(t)
	done := make(chan *http.Response, 1)
	go func() {
		resp, _ := h.do("POST", "/v1/intents?wait=1h", `{"intent_type":"echo","payload":{}}`)
		done <- resp
	}()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := h.blockUntilWaiting(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := h.srv.Shutdown(ctx); err != nil { // must not wait an hour
		t.Fatal(err)
	}
	if resp := <-done; resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status = %d, want 202 pending", resp.StatusCode)
	}
}

func TestRequestsAreLoggedAtDebug(t *testing.T) {
	var buf syncBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := newHarness(t, withOption(api.WithLogger(logger)))
	h.do("GET", "/v1/intents/nope", "")
	if s := buf.String(); !strings.Contains(s, `"msg":"http request"`) || !strings.Contains(s, `"route":"/v1/intents/{id}"`) ||
		!strings.Contains(s, `"status":404`) {
		t.Fatalf("log: %s", s)
	}
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
