package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/apitest"
)

const admissionInterval = 5 * time.Second

// admissionCatalog: echo answers within 2 s (bounded to 1–4 s), served by
// agent echo.
var admissionCatalog = api.Catalog{
	Agents:      []api.AgentInfo{{Name: "echo", Topic: "t-echo"}},
	IntentTypes: []api.IntentTypeInfo{{Name: "echo", Agent: "echo", TimeoutMs: 2000, MinTimeoutMs: 1000, MaxTimeoutMs: 4000}},
}

type admissionHarness struct {
	*harness
	backlog *apitest.Backlog
	clock   *clockwork.FakeClock // the samples' clock
	reg     *prometheus.Registry // the admission's metric
}

// newAdmissionHarness serves an API with admission at fraction 0.8 on a
// fake backlog, the router's slack 100 ms, the agents' 0.
func newAdmissionHarness(t *testing.T, hopts ...harnessOpt) *admissionHarness {
	t.Helper()
	ah := &admissionHarness{backlog: &apitest.Backlog{}, clock: clockwork.NewFakeClock(), reg: prometheus.NewRegistry()}
	a, err := api.NewAdmission(api.AdmissionConfig{BacklogFraction: 0.8, Interval: admissionInterval, RouterSlack: 100 * time.Millisecond},
		ah.backlog, ah.clock, ah.reg)
	if err != nil {
		t.Fatal(err)
	}
	hopts = append(hopts, withOption(api.WithAdmission(a)), withOption(api.WithCatalog(admissionCatalog)))
	ah.harness = newHarness(t, hopts...)
	return ah
}

func (ah *admissionHarness) refused(reason string) float64 {
	ah.t.Helper()
	mfs, err := ah.reg.Gather()
	if err != nil {
		ah.t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == "switchboard_api_admission_refused_total" && m.GetLabel()[0].GetValue() == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

type refusalBody struct {
	Error struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Reason    string `json:"reason"`
		BacklogMs *int64 `json:"backlog_ms"`
	} `json:"error"`
}

func TestAdmissionRefusesBeforePublishing(t *testing.T) {
	h := newAdmissionHarness(t)
	now := h.clock.Now()
	// 1.6 s of router backlog (less its 100 ms slack: 1.5 s) and 0.2 s at
	// the agent: 1.7 s ≥ 0.8 × 2 s.
	h.backlog.SetRouter(1600*time.Millisecond, now.Add(-2*time.Second))
	h.backlog.SetAgent("echo", 200*time.Millisecond, now.Add(-time.Second))

	resp, b := h.do("POST", "/v1/intents", `{"intent_type":"echo","payload":{}}`)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503: %s", resp.StatusCode, b)
	}
	// The next sample is due 3 s after the older one (5 s interval).
	if ra := resp.Header.Get("Retry-After"); ra != "3" {
		t.Errorf("Retry-After %q, want 3", ra)
	}
	body := decode[refusalBody](t, b)
	if body.Error.Code != "overloaded" || body.Error.Reason != api.ReasonRouterBacklog || body.Error.BacklogMs == nil || *body.Error.BacklogMs != 1700 {
		t.Errorf("body %s", b)
	}
	if strings.Count(string(b), "\n") != 1 || !strings.Contains(body.Error.Message, "1.5s for a router and 200ms for agent echo") {
		t.Errorf("message %q", body.Error.Message)
	}
	if n := len(h.pub.Requests()); n != 0 {
		t.Fatalf("%d intents published despite the refusal", n)
	}
	if v := h.refused(api.ReasonRouterBacklog); v != 1 {
		t.Errorf("refused{router_backlog} = %v, want 1", v)
	}

	// The agent's wait dominates: the reason says so.
	h.backlog.SetRouter(0, now)
	h.backlog.SetAgent("echo", 1700*time.Millisecond, now)
	resp, b = h.do("POST", "/v1/intents", `{"intent_type":"echo","payload":{}}`)
	if body = decode[refusalBody](t, b); resp.StatusCode != http.StatusServiceUnavailable || body.Error.Reason != api.ReasonAgentBacklog {
		t.Errorf("agent backlog: %d %s", resp.StatusCode, b)
	}
	if resp.Header.Get("Retry-After") != "5" {
		t.Errorf("Retry-After %q after a fresh sample, want 5", resp.Header.Get("Retry-After"))
	}

	// The intent's own timeout counts (clamped to the type's bounds): 3 s
	// leaves room for 1.7 s; 10 s is clamped to 4 s, which does too; 500 ms
	// is clamped up to 1 s, which does not.
	for _, tc := range []struct {
		timeout string
		want    int
	}{{"3000", http.StatusAccepted}, {"10000", http.StatusAccepted}, {"500", http.StatusServiceUnavailable}} {
		resp, b = h.do("POST", "/v1/intents", `{"intent_type":"echo","payload":{},"timeout_ms":`+tc.timeout+`}`)
		if resp.StatusCode != tc.want {
			t.Errorf("timeout_ms %s: status %d, want %d: %s", tc.timeout, resp.StatusCode, tc.want, b)
		}
	}
	// An intent type the catalog does not list is the router's to answer.
	if resp, b = h.do("POST", "/v1/intents", `{"intent_type":"unlisted","payload":{}}`); resp.StatusCode != http.StatusAccepted {
		t.Errorf("unlisted type: %d %s", resp.StatusCode, b)
	}
	if v := h.refused(api.ReasonAgentBacklog); v != 2 {
		t.Errorf("refused{agent_backlog} = %v, want 2", v)
	}
}

func TestAdmissionAdmits(t *testing.T) {
	h := newAdmissionHarness(t)
	now := h.clock.Now()
	// Unknown backlog (never sampled) admits.
	if resp, b := h.do("POST", "/v1/intents", `{"intent_type":"echo","payload":{}}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("unknown backlog: %d %s", resp.StatusCode, b)
	}
	// Below the line: 1.55 s − 0.1 s slack = 1.45 s < 1.6 s.
	h.backlog.SetRouter(1550*time.Millisecond, now)
	if resp, b := h.do("POST", "/v1/intents", `{"intent_type":"echo","payload":{}}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("below the fraction: %d %s", resp.StatusCode, b)
	}
	// Over it, then the sample goes stale (3 intervals without a new one:
	// the sampler cannot reach Kafka, say): unknown again, which admits.
	h.backlog.SetRouter(30*time.Second, now)
	if resp, _ := h.do("POST", "/v1/intents", `{"intent_type":"echo","payload":{}}`); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("over the fraction: %d", resp.StatusCode)
	}
	h.clock.Advance(3 * admissionInterval)
	if resp, _ := h.do("POST", "/v1/intents", `{"intent_type":"echo","payload":{}}`); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("3 intervals old is not yet stale: %d", resp.StatusCode)
	}
	h.clock.Advance(time.Millisecond)
	if resp, b := h.do("POST", "/v1/intents", `{"intent_type":"echo","payload":{}}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("stale sample: %d %s", resp.StatusCode, b)
	}
	if n := len(h.pub.Requests()); n != 3 {
		t.Errorf("%d published, want 3", n)
	}
}

// A repeat of an intent that has its result gets the result, not a
// refusal; a repeat by Idempotency-Key of one already published gets its
// id, not a refusal.
func TestAdmissionRepeatsAreAnswered(t *testing.T) {
	h := newAdmissionHarness(t)
	h.results.Add(result("done-1", "echo", ""))
	key := http.Header{"Idempotency-Key": {"k-1"}}
	resp, b := h.doWith("POST", "/v1/intents", `{"intent_type":"echo","payload":{"n":1}}`, key)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("first submission: %d %s", resp.StatusCode, b)
	}
	first := decode[map[string]any](t, b)["intent_id"]

	h.backlog.SetRouter(time.Minute, h.clock.Now())
	resp, b = h.do("POST", "/v1/intents?wait=1s", `{"intent_id":"done-1","intent_type":"echo","payload":{}}`)
	if resp.StatusCode != http.StatusOK || decode[map[string]any](t, b)["intent_id"] != "done-1" {
		t.Fatalf("repeat of a resolved intent: %d %s", resp.StatusCode, b)
	}
	resp, b = h.doWith("POST", "/v1/intents", `{"intent_type":"echo","payload":{"n":1}}`, key)
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("Idempotent-Replayed") != "true" || decode[map[string]any](t, b)["intent_id"] != first {
		t.Fatalf("Idempotency-Key repeat: %d %s", resp.StatusCode, b)
	}
	// A new intent, or one with an id nobody resolved, is refused.
	for _, body := range []string{`{"intent_type":"echo","payload":{}}`, `{"intent_id":"never-seen","intent_type":"echo","payload":{}}`} {
		if resp, b = h.do("POST", "/v1/intents", body); resp.StatusCode != http.StatusServiceUnavailable ||
			!strings.Contains(decode[refusalBody](t, b).Error.Message, "an unknown while for agent echo") {
			t.Errorf("%s: %d %s", body, resp.StatusCode, b)
		}
	}
	// A refused key is forgotten: once admitted, a retry with it publishes.
	key2 := http.Header{"Idempotency-Key": {"k-2"}}
	if resp, _ = h.doWith("POST", "/v1/intents", `{"intent_type":"echo","payload":{"n":2}}`, key2); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("refused with a key: %d", resp.StatusCode)
	}
	h.backlog.SetRouter(0, h.clock.Now())
	if resp, b = h.doWith("POST", "/v1/intents", `{"intent_type":"echo","payload":{"n":2}}`, key2); resp.StatusCode != http.StatusAccepted || resp.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry after a refusal: %d %s %v", resp.StatusCode, b, resp.Header)
	}
}

// One tenant's result does not spare another tenant's submission with the
// same intent id from a refusal, and the refusal it gets is the one an
// unknown id gets: it says nothing of the first tenant's intent.
func TestAdmissionTenantIsolation(t *testing.T) {
	h := newAdmissionHarness(t, withAuth(nil))
	h.results.Add(tenantResult("shared-id", "acme", ""))
	h.backlog.SetRouter(time.Minute, h.clock.Now())

	resp, b := h.doWith("POST", "/v1/intents?wait=1s", `{"intent_id":"shared-id","intent_type":"echo","payload":{}}`, bearer(keyAcme))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("acme's own repeat: %d %s", resp.StatusCode, b)
	}
	theirs, tb := h.doWith("POST", "/v1/intents?wait=1s", `{"intent_id":"shared-id","intent_type":"echo","payload":{}}`, bearer(keyGlobex))
	unknown, ub := h.doWith("POST", "/v1/intents?wait=1s", `{"intent_id":"other-id","intent_type":"echo","payload":{}}`, bearer(keyGlobex))
	if theirs.StatusCode != http.StatusServiceUnavailable || unknown.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("globex: %d %s / %d %s", theirs.StatusCode, tb, unknown.StatusCode, ub)
	}
	if string(tb) != string(ub) || strings.Contains(string(tb), "acme") {
		t.Errorf("globex's refusal for acme's id differs from an unknown id's:\n%s\n%s", tb, ub)
	}
	for _, r := range h.pub.Requests() {
		if r.IntentID == "shared-id" && deref(r.Tenant) == "globex" {
			t.Error("globex's refused intent was published")
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestNewAdmissionChecksItsConfig(t *testing.T) {
	for _, cfg := range []api.AdmissionConfig{
		{BacklogFraction: 0, Interval: time.Second},
		{BacklogFraction: 1.5, Interval: time.Second},
		{BacklogFraction: 0.5},
		{BacklogFraction: 0.5, Interval: time.Second, RouterSlack: -1},
	} {
		if _, err := api.NewAdmission(cfg, &apitest.Backlog{}, clockwork.NewFakeClock(), prometheus.NewRegistry()); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
	var nilAdmission *api.Admission
	if r := nilAdmission.Check(admissionCatalog.IntentTypes[0], true, nil); r != nil {
		t.Errorf("a nil Admission refused: %v", r)
	}
}
