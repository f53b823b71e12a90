package api_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/apitest"
	"github.com/switchboard-mcp/switchboard/schemas"
)

func (h *harness) post(body string, hdr map[string]string) (*http.Response, []byte) {
	h.t.Helper()
	req, err := http.NewRequest("POST", h.ts.URL+"/v1/intents", strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := h.ts.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp, b
}

func TestSubmitIsIdempotentByKey(t *testing.T) {
	h := newHarness(t)
	key := map[string]string{"Idempotency-Key": "k-1"}
	resp, body := h.post(`{"intent_type":"echo","payload":{"a":1}}`, key)
	first := decode[acceptedBody](t, body)
	if resp.StatusCode != http.StatusAccepted || first.IntentID == "" {
		t.Fatalf("first: %d %s", resp.StatusCode, body)
	}
	resp, body = h.post(`{"intent_type":"echo","payload":{"a":1}}`, key)
	if again := decode[acceptedBody](t, body); resp.StatusCode != http.StatusAccepted || again.IntentID != first.IntentID ||
		resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat: %d %s (replayed %q), want the first id %s", resp.StatusCode, body, resp.Header.Get("Idempotent-Replayed"), first.IntentID)
	}
	if n := len(h.pub.Requests()); n != 1 {
		t.Fatalf("published %d times, want once", n)
	}
	if got := metricValue(t, h.reg, "switchboard_api_idempotent_repeats_total"); got != 1 {
		t.Fatalf("switchboard_api_idempotent_repeats_total = %v, want 1", got)
	}
	// The same key with another intent is a client bug.
	resp, body = h.post(`{"intent_type":"echo","payload":{"a":2}}`, key)
	wantError(t, resp, body, http.StatusUnprocessableEntity, "idempotency_key_reused", "Idempotency-Key")
	// Another key publishes.
	_, body = h.post(`{"intent_type":"echo","payload":{"a":1}}`, map[string]string{"Idempotency-Key": "k-2"})
	if other := decode[acceptedBody](t, body); other.IntentID == first.IntentID || len(h.pub.Requests()) != 2 {
		t.Fatalf("another key: %s, %d published", body, len(h.pub.Requests()))
	}
	resp, body = h.post(`{"intent_type":"echo","payload":1}`, map[string]string{"Idempotency-Key": strings.Repeat("k", 256)})
	wantError(t, resp, body, http.StatusBadRequest, "invalid_parameter", "Idempotency-Key")
}

func TestSubmitIsIdempotentByIntentIDWithinTheWindow(t *testing.T) {
	h := newHarness(t, withOption(api.WithIdempotencyWindow(time.Minute)))
	body := `{"intent_id":"same-1","intent_type":"echo","payload":{}}`
	for range 3 {
		if resp, b := h.post(body, nil); resp.StatusCode != http.StatusAccepted || decode[acceptedBody](t, b).IntentID != "same-1" {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	}
	if n := len(h.pub.Requests()); n != 1 {
		t.Fatalf("published %d times, want once", n)
	}
	resp, b := h.post(`{"intent_id":"same-1","intent_type":"other","payload":{}}`, nil)
	wantError(t, resp, b, http.StatusUnprocessableEntity, "idempotency_key_reused", "intent_id")

	h.clock.Advance(time.Minute + time.Second) // the window has passed: the router's dedup stands behind
	h.post(body, nil)
	if n := len(h.pub.Requests()); n != 2 {
		t.Fatalf("after the window published %d times, want 2", n)
	}
}

func TestSubmitRepeatAfterAFailedPublishPublishes(t *testing.T) {
	h := newHarness(t)
	var fail atomic.Bool
	fail.Store(true)
	h.pub.Func = func(context.Context, *schemas.IntentRequest) error {
		if fail.Load() {
			return errors.New("broker down")
		}
		return nil
	}
	key := map[string]string{"Idempotency-Key": "k"}
	if resp, b := h.post(`{"intent_type":"echo","payload":{}}`, key); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	fail.Store(false)
	if resp, b := h.post(`{"intent_type":"echo","payload":{}}`, key); resp.StatusCode != http.StatusAccepted ||
		resp.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry after failure: %d %s", resp.StatusCode, b)
	}
	if n := len(h.pub.Requests()); n != 2 {
		t.Fatalf("publish attempts %d, want 2", n)
	}
}

func TestGetIntentTimeline(t *testing.T) {
	log := apitest.NewLog(1)
	h := newHarness(t, withOption(api.WithHistory(log)))
	log.Attach(h.results, true)
	log.AppendTimeout(&schemas.IntentTimeout{
		IntentID: "f-1", IntentType: "fraud_check", Agent: "slow",
		Deadline: 1300, TimedOutAt: 1301, ElapsedMs: 300, Reason: "deadline", Fallback: "static",
	})

	resp, body := h.do("GET", "/v1/intents/f-1", "")
	type view struct {
		IntentID string `json:"intent_id"`
		Status   string `json:"status"`
		Outcome  string `json:"outcome"`
		Timeout  *struct {
			Reason string `json:"reason"`
		} `json:"timeout"`
		Events []struct {
			Event string `json:"event"`
			At    int64  `json:"at"`
		} `json:"events"`
	}
	if v := decode[view](t, body); resp.StatusCode != http.StatusOK || v.Status != "pending" || len(v.Events) != 1 || v.Events[0].Event != "timed_out" {
		t.Fatalf("pending: %d %s", resp.StatusCode, body)
	}

	res := result("f-1", "fraud_check", "")
	res.Outcome = schemas.OutcomeFallbackStatic
	res.Timeline = schemas.Timeline{ReceivedAt: 1000, DispatchedAt: schemas.Ptr[int64](1001), ResolvedAt: 1302, Deadline: 1300}
	log.AppendResult(res)
	resp, body = h.do("GET", "/v1/intents/f-1", "")
	v := decode[view](t, body)
	var got []string
	for _, e := range v.Events {
		got = append(got, e.Event)
	}
	if resp.StatusCode != http.StatusOK || v.Status != "resolved" || v.Outcome != "fallback_static" || v.Timeout == nil ||
		strings.Join(got, ",") != "received,dispatched,timed_out,resolved" {
		t.Fatalf("resolved: %d %s", resp.StatusCode, body)
	}
}

func TestAgentsAndIntentTypes(t *testing.T) {
	log := apitest.NewLog(1)
	h := newHarness(t, withOption(api.WithHistory(log)), withOption(api.WithCatalog(api.Catalog{
		Agents:      []api.AgentInfo{{Name: "echo", Topic: "mcp.agent.echo.request"}, {Name: "slow", Topic: "mcp.agent.slow.request"}},
		IntentTypes: []api.IntentTypeInfo{{Name: "echo", Agent: "echo", TimeoutMs: 5000, Fallback: "none"}},
	})), withOption(api.WithAgentState(func(a string) any {
		if a == "slow" {
			return map[string]string{"breaker": "open"}
		}
		return nil
	})))
	log.Attach(h.results, true)
	resp, body := h.post(`{"intent_id":"e-1","intent_type":"echo","payload":{}}`, nil)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	r := result("e-2", "echo", "")
	r.Agent = "echo"
	log.AppendResult(r)
	r = result("x-1", "extra", "")
	r.Agent = "echo"
	r.Outcome = schemas.OutcomeTimedOut
	log.AppendResult(r)
	log.AppendTimeout(&schemas.IntentTimeout{IntentID: "x-1", IntentType: "extra", Agent: "echo", Reason: "deadline", Fallback: "none"})

	type counts struct {
		Resolved  int64            `json:"resolved"`
		ByOutcome map[string]int64 `json:"by_outcome"`
		Timeouts  int64            `json:"timeout_events"`
		InFlight  int64            `json:"in_flight"`
	}
	_, body = h.do("GET", "/v1/agents", "")
	agents := decode[struct {
		Agents []struct {
			Name       string            `json:"name"`
			Topic      string            `json:"topic"`
			Configured bool              `json:"configured"`
			Counts     counts            `json:"counts"`
			State      map[string]string `json:"state"`
		} `json:"agents"`
	}](t, body).Agents
	if len(agents) != 2 || agents[0].Name != "echo" || agents[0].Counts.Resolved != 2 || agents[0].Counts.ByOutcome["timed_out"] != 1 ||
		agents[0].Counts.Timeouts != 1 || agents[1].Name != "slow" || agents[1].Counts.Resolved != 0 || agents[1].State["breaker"] != "open" {
		t.Fatalf("agents: %s", body)
	}
	_, body = h.do("GET", "/v1/intent-types", "")
	types := decode[struct {
		Types []struct {
			Name       string `json:"name"`
			Agent      string `json:"agent"`
			TimeoutMs  int64  `json:"timeout_ms"`
			Configured bool   `json:"configured"`
			Counts     counts `json:"counts"`
		} `json:"intent_types"`
	}](t, body).Types
	if len(types) != 2 || types[0].Name != "echo" || !types[0].Configured || types[0].TimeoutMs != 5000 ||
		types[0].Counts.InFlight != 1 || types[0].Counts.ByOutcome["answered"] != 1 ||
		types[1].Name != "extra" || types[1].Configured || types[1].Counts.ByOutcome["timed_out"] != 1 {
		t.Fatalf("intent types: %s", body)
	}
	log.AppendResult(result("e-1", "echo", "")) // the submitted one resolves
	_, body = h.do("GET", "/v1/intent-types", "")
	if !strings.Contains(string(body), `"in_flight":0`) {
		t.Fatalf("in flight after the result: %s", body)
	}
}

func TestConsoleIsServedFromTheBinary(t *testing.T) {
	h := newHarness(t)
	for path, want := range map[string]string{
		"/":                    "text/html",
		"/console/console.js":  "text/javascript",
		"/console/console.css": "text/css",
	} {
		resp, body := h.do("GET", path, "")
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), want) ||
			!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") || len(body) < 100 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, resp.Header)
		}
		if strings.Contains(string(body), "https://") {
			t.Fatalf("GET %s refers to another site", path)
		}
	}
	resp, body := h.do("GET", "/console/nope.js", "")
	wantError(t, resp, body, http.StatusNotFound, "not_found", "")
}

// TestSubmitConcurrentRepeatsPublishOnce: repeats that arrive while the
// first request is publishing wait for it and publish nothing.
func TestSubmitConcurrentRepeatsPublishOnce(t *testing.T) {
	h := newHarness(t)
	release := make(chan struct{})
	h.pub.Func = func(context.Context, *schemas.IntentRequest) error {
		<-release
		return nil
	}
	bodies := make(chan []byte, 5)
	for range 5 {
		h.bg.Add(1)
		go func() {
			defer h.bg.Done()
			req, _ := http.NewRequest("POST", h.ts.URL+"/v1/intents", strings.NewReader(`{"intent_type":"echo","payload":{}}`))
			req.Header.Set("Idempotency-Key", "k")
			var b []byte
			if resp, err := h.ts.Client().Do(req); err == nil {
				b, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			bodies <- b
		}()
	}
	eventually(t, "the first publish to start", func() bool { return len(h.pub.Requests()) == 1 })
	close(release)
	first := decode[acceptedBody](t, <-bodies).IntentID
	for range 4 {
		if id := decode[acceptedBody](t, <-bodies).IntentID; id != first || id == "" {
			t.Fatalf("ids %q and %q for one key", first, id)
		}
	}
	if n := len(h.pub.Requests()); n != 1 {
		t.Fatalf("published %d times, want once", n)
	}
}

// TestInFlightExpiresAfterTheIdempotencyWindow: an intent submitted here
// that never gets a result (the router dropped it) stops counting as in
// flight, and as pending, once the idempotency window has passed.
func TestInFlightExpiresAfterTheIdempotencyWindow(t *testing.T) {
	h := newHarness(t, withOption(api.WithIdempotencyWindow(time.Minute)))
	if resp, body := h.post(`{"intent_id":"dropped","intent_type":"echo","payload":{}}`, nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	inFlight := func() string {
		t.Helper()
		_, body := h.do("GET", "/v1/intent-types", "")
		return string(body)
	}
	if b := inFlight(); !strings.Contains(b, `"in_flight":1`) {
		t.Fatalf("just submitted: %s", b)
	}
	if resp, body := h.do("GET", "/v1/intents/dropped", ""); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"pending"`) {
		t.Fatalf("just submitted: %d %s", resp.StatusCode, body)
	}
	h.clock.Advance(time.Minute + time.Second)
	if b := inFlight(); !strings.Contains(b, `"in_flight":0`) {
		t.Fatalf("after the window: %s", b)
	}
	if resp, body := h.do("GET", "/v1/intents/dropped", ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("after the window: %d %s, want 404", resp.StatusCode, body)
	}
}
