package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/apitest"
)

// waitAnswer is what a caller of POST ?wait got: a response, or the
// client's error (its context ended).
type waitAnswer struct {
	status int
	body   []byte
	err    error
}

// startCall sends POST path with body (and hdr) on a goroutine of its own;
// the answer arrives on the channel. Cancelling ctx is the caller going
// away.
func (h *harness) startCall(ctx context.Context, path, body string, hdr http.Header) <-chan waitAnswer {
	return h.startRequest(ctx, http.MethodPost, path, body, hdr)
}

// startRequest is startCall with any method.
func (h *harness) startRequest(ctx context.Context, method, path, body string, hdr http.Header) <-chan waitAnswer {
	out := make(chan waitAnswer, 1)
	req, err := http.NewRequestWithContext(ctx, method, h.ts.URL+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	go func() {
		resp, err := h.ts.Client().Do(req)
		if err != nil {
			out <- waitAnswer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		out <- waitAnswer{status: resp.StatusCode, body: b, err: err}
	}()
	return out
}

// receive returns the answer on c, failing the test after testTimeout.
func receive(t *testing.T, what string, c <-chan waitAnswer) waitAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	select {
	case a := <-c:
		return a
	case <-ctx.Done():
		t.Fatalf("no answer for %s", what)
		return waitAnswer{}
	}
}

// newWaitLimitHarness serves an API whose waiting callers are bounded by
// max (a tenant's by perTenant); reg holds the limit's metrics.
func newWaitLimitHarness(t *testing.T, max, perTenant int, hopts ...harnessOpt) (*harness, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	l, err := api.NewWaitLimit(api.WaitLimitConfig{Max: max, MaxPerTenant: perTenant}, reg)
	if err != nil {
		t.Fatal(err)
	}
	return newHarness(t, append(hopts, withOption(api.WithWaitLimit(l)))...), reg
}

// waitingIs waits until reg's gauge of waiting callers reads n.
func waitingIs(t *testing.T, reg prometheus.Gatherer, n float64) {
	t.Helper()
	eventually(t, fmt.Sprintf("the waiting gauge to read %v", n), func() bool {
		return metricValue(t, reg, "switchboard_api_waiting_callers") == n
	})
}

// wantWaitingRefusal checks a 503 overloaded, reason waiting, Retry-After
// 1, without a backlog, whose message contains want.
func wantWaitingRefusal(t *testing.T, resp *http.Response, body []byte, want string) {
	t.Helper()
	var rb refusalBody
	if err := json.Unmarshal(body, &rb); err != nil || resp.StatusCode != http.StatusServiceUnavailable ||
		rb.Error.Code != "overloaded" || rb.Error.Reason != "waiting" || rb.Error.BacklogMs != nil ||
		resp.Header.Get("Retry-After") != "1" || !strings.Contains(rb.Error.Message, want) || strings.Contains(rb.Error.Message, "\n") {
		t.Fatalf("want 503 overloaded (waiting) saying %q: %d Retry-After %q %s", want, resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
}

// TestWaitLimitRefusesAtOnceAndFreesSlots: with two callers waiting on an
// instance bounded at two, a third ?wait (or ?stream=sse) is refused at
// once, 503 with Retry-After, and its intent is not published; a POST that
// does not wait is not bounded. A slot comes back when its caller's result
// arrives, when its wait ends, and when it goes away.
func TestWaitLimitRefusesAtOnceAndFreesSlots(t *testing.T) {
	h, reg := newWaitLimitHarness(t, 2, 2)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	byResult := h.startCall(ctx, "/v1/intents?wait=10s", `{"intent_id":"w-1","intent_type":"echo","payload":{}}`, nil)
	goneCtx, goAway := context.WithCancel(ctx)
	defer goAway()
	gone := h.startCall(goneCtx, "/v1/intents?wait=10s", `{"intent_id":"w-2","intent_type":"echo","payload":{}}`, nil)
	if err := h.blockUntilWaiting(ctx, 2); err != nil {
		t.Fatal(err)
	}
	waitingIs(t, reg, 2)

	for _, path := range []string{"/v1/intents?wait=10s", "/v1/intents?stream=sse"} {
		resp, b := h.do("POST", path, `{"intent_id":"w-3","intent_type":"echo","payload":{}}`)
		wantWaitingRefusal(t, resp, b, "this instance already holds 2 callers waiting for results here, its http.max_waiting")
	}
	if n := len(h.pub.Requests()); n != 2 {
		t.Fatalf("published %d intents, want 2 (the refused ones were not)", n)
	}
	if got := metricValue(t, reg, "switchboard_api_admission_refused_total"); got != 2 {
		t.Fatalf("refused_total = %v, want 2", got)
	}
	if resp, b := h.do("POST", "/v1/intents", `{"intent_id":"w-4","intent_type":"echo","payload":{}}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("a POST that does not wait: %d %s", resp.StatusCode, b)
	}

	// The result: its caller is answered and its slot freed.
	h.results.Add(result("w-1", "echo", ""))
	if a := receive(t, "the answered caller", byResult); a.err != nil || a.status != http.StatusOK {
		t.Fatalf("answered caller: %d %v %s", a.status, a.err, a.body)
	}
	waitingIs(t, reg, 1)
	// The caller going away frees its slot.
	goAway()
	if a := receive(t, "the caller gone", gone); a.err == nil {
		t.Fatalf("the cancelled caller got %d", a.status)
	}
	waitingIs(t, reg, 0)

	// Both slots are free: two callers wait again, a third is refused.
	timesOut := h.startCall(ctx, "/v1/intents?wait=1s", `{"intent_id":"w-5","intent_type":"echo","payload":{}}`, nil)
	stays := h.startCall(ctx, "/v1/intents?wait=10s", `{"intent_id":"w-6","intent_type":"echo","payload":{}}`, nil)
	eventually(t, "both callers published", func() bool { return len(h.pub.Requests()) == 5 })
	if err := h.clock.BlockUntilContext(ctx, 2); err != nil { // their waits' timers
		t.Fatal(err)
	}
	waitingIs(t, reg, 2)
	resp, b := h.do("POST", "/v1/intents?wait=10s", `{"intent_id":"w-7","intent_type":"echo","payload":{}}`)
	wantWaitingRefusal(t, resp, b, "http.max_waiting")

	// The end of a wait frees its slot: the caller gets 202 pending.
	h.clock.Advance(1500 * time.Millisecond)
	if a := receive(t, "the caller whose wait ended", timesOut); a.err != nil || a.status != http.StatusAccepted {
		t.Fatalf("wait ended: %d %v %s", a.status, a.err, a.body)
	}
	waitingIs(t, reg, 1)
	again := h.startCall(ctx, "/v1/intents?wait=10s", `{"intent_id":"w-8","intent_type":"echo","payload":{}}`, nil)
	waitingIs(t, reg, 2) // the slot was given again
	h.results.Add(result("w-6", "echo", ""))
	h.results.Add(result("w-8", "echo", ""))
	for _, c := range []<-chan waitAnswer{stays, again} {
		if a := receive(t, "a last caller", c); a.err != nil || a.status != http.StatusOK {
			t.Fatalf("last caller: %d %v %s", a.status, a.err, a.body)
		}
	}
	waitingIs(t, reg, 0)
	if got := metricValue(t, reg, "switchboard_api_admission_refused_total"); got != 3 {
		t.Fatalf("refused_total = %v, want 3", got)
	}
}

// TestWaitLimitPerTenant: one tenant at its bound is refused, naming its
// bound, while another tenant's callers still wait; the instance's bound
// holds over both.
func TestWaitLimitPerTenant(t *testing.T) {
	h, reg := newWaitLimitHarness(t, 3, 2, withAuth(nil))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	a1 := h.startCall(ctx, "/v1/intents?wait=10s", `{"intent_id":"a-1","intent_type":"echo","payload":{}}`, bearer(keyAcme))
	a2 := h.startCall(ctx, "/v1/intents?wait=10s", `{"intent_id":"a-2","intent_type":"echo","payload":{}}`, bearer(keyAcme))
	if err := h.blockUntilWaiting(ctx, 2); err != nil {
		t.Fatal(err)
	}
	waitingIs(t, reg, 2)
	resp, b := h.doWith("POST", "/v1/intents?wait=10s", `{"intent_id":"a-3","intent_type":"echo","payload":{}}`, bearer(keyAcme))
	wantWaitingRefusal(t, resp, b, `tenant "acme" already has 2 callers waiting for results here, its http.max_waiting_per_tenant`)

	g1 := h.startCall(ctx, "/v1/intents?wait=10s", `{"intent_id":"g-1","intent_type":"echo","payload":{}}`, bearer(keyGlobex))
	if err := h.blockUntilWaiting(ctx, 3); err != nil {
		t.Fatal(err)
	}
	waitingIs(t, reg, 3)
	resp, b = h.doWith("POST", "/v1/intents?wait=10s", `{"intent_id":"g-2","intent_type":"echo","payload":{}}`, bearer(keyGlobex))
	wantWaitingRefusal(t, resp, b, "this instance already holds 3 callers")
	if n := len(h.pub.Requests()); n != 3 {
		t.Fatalf("published %d intents, want 3", n)
	}

	for _, id := range []string{"a-1", "a-2", "g-1"} {
		h.results.Add(tenantResult(id, map[byte]string{'a': "acme", 'g': "globex"}[id[0]], ""))
	}
	for _, c := range []<-chan waitAnswer{a1, a2, g1} {
		if a := receive(t, "a waiting caller", c); a.err != nil || a.status != http.StatusOK {
			t.Fatalf("caller: %d %v %s", a.status, a.err, a.body)
		}
	}
	waitingIs(t, reg, 0)
}

// TestWaitLimitBoundsGetWait: GET /v1/intents/{id}?wait takes a slot
// while it waits, like POST ?wait; one more is refused at once. A wait on
// another tenant's intent is a wait on an unknown id, and its refusal
// reads word for word the same: it tells nothing of the other tenant.
func TestWaitLimitBoundsGetWait(t *testing.T) {
	h, reg := newWaitLimitHarness(t, 3, 1, withAuth(nil))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if resp, b := h.doWith("POST", "/v1/intents", `{"intent_id":"a-1","intent_type":"echo","payload":{}}`, bearer(keyAcme)); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST: %d %s", resp.StatusCode, b)
	}
	acme := h.startRequest(ctx, "GET", "/v1/intents/a-1?wait=10s", "", bearer(keyAcme))
	if err := h.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	waitingIs(t, reg, 1)
	resp, b := h.doWith("GET", "/v1/intents/a-1?wait=10s", "", bearer(keyAcme))
	wantWaitingRefusal(t, resp, b, `tenant "acme" already has 1 callers waiting for results here, its http.max_waiting_per_tenant`)

	globex := h.startRequest(ctx, "GET", "/v1/intents/a-1?wait=10s", "", bearer(keyGlobex))
	if err := h.clock.BlockUntilContext(ctx, 2); err != nil {
		t.Fatal(err)
	}
	waitingIs(t, reg, 2)
	_, other := h.doWith("GET", "/v1/intents/a-1?wait=10s", "", bearer(keyGlobex))
	resp, unknown := h.doWith("GET", "/v1/intents/nothing-here?wait=10s", "", bearer(keyGlobex))
	wantWaitingRefusal(t, resp, unknown, `tenant "globex" already has 1 callers waiting`)
	if string(other) != string(unknown) {
		t.Fatalf("refusals differ: another tenant's intent %s, an unknown one %s", other, unknown)
	}

	h.results.Add(tenantResult("a-1", "acme", ""))
	if a := receive(t, "acme's wait", acme); a.err != nil || a.status != http.StatusOK {
		t.Fatalf("acme's wait: %d %v %s", a.status, a.err, a.body)
	}
	waitingIs(t, reg, 1)
	h.clock.Advance(11 * time.Second)
	if a := receive(t, "globex's wait", globex); a.err != nil || a.status != http.StatusNotFound {
		t.Fatalf("globex's wait on acme's intent: %d %v %s", a.status, a.err, a.body)
	}
	waitingIs(t, reg, 0)
}

func TestNewWaitLimitRefusesBadBounds(t *testing.T) {
	for _, c := range []api.WaitLimitConfig{{Max: -1}, {Max: 4, MaxPerTenant: 5}, {MaxPerTenant: -2}} {
		if _, err := api.NewWaitLimit(c, prometheus.NewRegistry()); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	// Admission and the wait limit count in one metric, whichever comes
	// first.
	reg := prometheus.NewRegistry()
	if _, err := api.NewWaitLimit(api.WaitLimitConfig{}, reg); err != nil {
		t.Fatal(err)
	}
	if _, err := api.NewAdmission(api.AdmissionConfig{BacklogFraction: 0.8, Interval: admissionInterval}, &apitest.Backlog{}, clockwork.NewFakeClock(), reg); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, mf := range mfs {
		if mf.GetName() == "switchboard_api_admission_refused_total" {
			for _, m := range mf.GetMetric() {
				reasons = append(reasons, m.GetLabel()[0].GetValue())
			}
		}
	}
	if strings.Join(reasons, ",") != "agent_backlog,router_backlog,waiting" {
		t.Fatalf("reasons = %v", reasons)
	}
}
