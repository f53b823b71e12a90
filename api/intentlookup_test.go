package api_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// fakeLookup is an IntentLookup over a map: the lookup store of the
// cluster, as the API sees it.
type fakeLookup struct {
	mu         sync.Mutex
	intents    map[[2]string]api.IntentStatus // by (tenant, id)
	catchingUp bool
	asked      int
}

func newFakeLookup() *fakeLookup { return &fakeLookup{intents: map[[2]string]api.IntentStatus{}} }

func (f *fakeLookup) put(st api.IntentStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.intents[[2]string{st.Tenant, st.IntentID}] = st
}

func (f *fakeLookup) Lookup(_ context.Context, tenant, id string) (api.IntentStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	for k, st := range f.intents {
		if k[1] == id && (tenant == api.AnyTenant || k[0] == tenant) {
			return st, nil
		}
	}
	if f.catchingUp {
		return api.IntentStatus{}, api.ErrLookupCatchingUp
	}
	return api.IntentStatus{}, api.ErrIntentNotFound
}

func (f *fakeLookup) Recent(context.Context, string, int, string) ([]api.IntentStatus, string, error) {
	return nil, "", nil
}

func stored(tenant, id string, outcome schemas.Outcome) api.IntentStatus {
	r := result(id, "echo", "")
	r.Outcome = outcome
	r.Timeline = schemas.Timeline{ReceivedAt: 100, DispatchedAt: schemas.Ptr(int64(101)), AnsweredAt: schemas.Ptr(int64(104)), ResolvedAt: 105, Deadline: 1100}
	if tenant != "" {
		r.Tenant = &tenant
	}
	return api.IntentStatus{IntentID: id, Tenant: tenant, Result: r}
}

type intentBody struct {
	IntentID     string `json:"intent_id"`
	Status       string `json:"status"`
	Outcome      string `json:"outcome"`
	State        string `json:"state"`
	Agent        string `json:"agent"`
	Deadline     int64  `json:"deadline"`
	IdleDeadline int64  `json:"idle_deadline"`
	Events       []struct {
		Event string `json:"event"`
		At    int64  `json:"at"`
	} `json:"events"`
	Timeline *schemas.Timeline `json:"timeline"`
}

func events(b intentBody) string {
	var out []string
	for _, e := range b.Events {
		out = append(out, e.Event)
	}
	return strings.Join(out, ",")
}

func TestGetAnswersFromTheLookupStore(t *testing.T) {
	store := newFakeLookup()
	store.put(stored("", "resolved-elsewhere", schemas.OutcomeAnswered))
	store.put(api.IntentStatus{IntentID: "pending-elsewhere", Pending: &api.PendingState{
		State: api.PendingDispatched, IntentType: "echo", Agent: "agent-a", ReceivedAt: 200, DispatchedAt: 201, Deadline: 5200,
	}})
	h := newHarness(t, withOption(api.WithLookup(store)))

	resp, body := h.do("GET", "/v1/intents/resolved-elsewhere", "")
	b := decode[intentBody](t, body)
	if resp.StatusCode != 200 || b.Status != "resolved" || b.Outcome != "answered" || b.Timeline.ResolvedAt != 105 ||
		events(b) != "received,dispatched,answered,resolved" {
		t.Fatalf("resolved: %d %s", resp.StatusCode, body)
	}
	resp, body = h.do("GET", "/v1/intents/pending-elsewhere", "")
	b = decode[intentBody](t, body)
	if resp.StatusCode != 200 || b.Status != "pending" || b.State != "dispatched" || b.Agent != "agent-a" || b.Deadline != 5200 ||
		events(b) != "received,dispatched" {
		t.Fatalf("pending: %d %s", resp.StatusCode, body)
	}
	// This instance's memory comes first.
	h.results.Add(result("pending-elsewhere", "echo", ""))
	if _, body = h.do("GET", "/v1/intents/pending-elsewhere", ""); decode[intentBody](t, body).Status != "resolved" {
		t.Fatalf("memory's result: %s", body)
	}
	resp, body = h.do("GET", "/v1/intents/unknown", "")
	if resp.StatusCode != 404 || !strings.Contains(string(body), `"not_found"`) {
		t.Fatalf("unknown: %d %s", resp.StatusCode, body)
	}
}

func TestGetOfAnotherTenantsIntentIsAnUnknownOne(t *testing.T) {
	store := newFakeLookup()
	store.put(stored("globex", "theirs", schemas.OutcomeAnswered))
	store.put(api.IntentStatus{IntentID: "theirs-pending", Tenant: "globex", Pending: &api.PendingState{State: api.PendingQueued, Deadline: 9}})
	store.put(stored("acme", "ours", schemas.OutcomeTimedOut))
	h := newHarness(t, withOption(api.WithLookup(store)), withAuth(nil))
	acme := http.Header{"Authorization": {"Bearer " + keyAcme}}

	_, unknown := h.doWith("GET", "/v1/intents/nothing-here", "", acme)
	for _, id := range []string{"theirs", "theirs-pending"} {
		resp, body := h.doWith("GET", "/v1/intents/"+id, "", acme)
		if resp.StatusCode != 404 || strings.ReplaceAll(string(body), id, "nothing-here") != string(unknown) {
			t.Fatalf("another tenant's %s: %d %s; an unknown one: %s", id, resp.StatusCode, body, unknown)
		}
		// DELETE too: 202 as for an unknown intent, never 409.
		if resp, body := h.doWith("DELETE", "/v1/intents/"+id, "", acme); resp.StatusCode != 202 {
			t.Fatalf("DELETE of another tenant's %s: %d %s", id, resp.StatusCode, body)
		}
	}
	if resp, body := h.doWith("GET", "/v1/intents/ours", "", acme); resp.StatusCode != 200 || decode[intentBody](t, body).Outcome != "timed_out" {
		t.Fatalf("own intent: %d %s", resp.StatusCode, body)
	}
}

func TestGetRefusesWhatIsNoIntentIDWithoutALookup(t *testing.T) {
	store := newFakeLookup()
	h := newHarness(t, withOption(api.WithLookup(store)))
	for _, path := range []string{
		"/v1/intents/" + strings.Repeat("x", 129),
		"/v1/intents/has%20space",
		"/v1/intents/%00",
		"/v1/intents/%FF%FE",
		"/v1/intents/%0A",
	} {
		resp, body := h.do("GET", path, "")
		if resp.StatusCode != 400 || !strings.Contains(string(body), `"field":"id"`) {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
		}
		if resp, body := h.do("DELETE", path, ""); resp.StatusCode != 400 {
			t.Fatalf("DELETE %s: %d %s", path, resp.StatusCode, body)
		}
	}
	if store.asked != 0 {
		t.Fatalf("the store was asked %d times for ids that are none", store.asked)
	}
	if resp, body := h.do("GET", "/v1/intents/"+strings.Repeat("x", 128), ""); resp.StatusCode != 404 {
		t.Fatalf("the longest id: %d %s", resp.StatusCode, body)
	}
}

func TestGetWhileTheStoreCatchesUpIs503(t *testing.T) {
	store := newFakeLookup()
	store.catchingUp = true
	store.put(stored("", "known", schemas.OutcomeAnswered))
	h := newHarness(t, withOption(api.WithLookup(store)))
	resp, body := h.do("GET", "/v1/intents/not-yet", "")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"not_ready"`) {
		t.Fatalf("a miss while catching up: %d %s", resp.StatusCode, body)
	}
	if resp, _ := h.do("GET", "/v1/intents/known", ""); resp.StatusCode != 200 {
		t.Fatalf("a hit while catching up: %d", resp.StatusCode)
	}
}

func TestCancelOfAnIntentResolvedElsewhereIs409(t *testing.T) {
	store := newFakeLookup()
	store.put(stored("", "done", schemas.OutcomeFallbackStatic))
	h := newHarness(t, withOption(api.WithLookup(store)))
	resp, body := h.do("DELETE", "/v1/intents/done", "")
	if resp.StatusCode != 409 || !strings.Contains(string(body), `"outcome":"fallback_static"`) {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, body)
	}
	if n := len(h.pub.Cancels()); n != 0 {
		t.Fatalf("%d cancel records published for a resolved intent", n)
	}
}

func TestGetWithWaitWaitsForThePendingIntentsResult(t *testing.T) {
	store := newFakeLookup()
	store.put(api.IntentStatus{IntentID: "slow", Pending: &api.PendingState{State: api.PendingDispatched, Deadline: 10}})
	h := newHarness(t, withOption(api.WithLookup(store)))
	type answer struct {
		resp *http.Response
		body []byte
	}
	done := make(chan answer, 1)
	go func() {
		resp, body := h.do("GET", "/v1/intents/slow?wait=5s", "")
		done <- answer{resp, body}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := h.clock.BlockUntilContext(ctx, 1); err != nil { // the wait's timer
		t.Fatal(err)
	}
	h.results.Add(result("slow", "echo", ""))
	a := <-done
	if a.resp.StatusCode != 200 || decode[intentBody](t, a.body).Status != "resolved" {
		t.Fatalf("GET ?wait: %d %s", a.resp.StatusCode, a.body)
	}
	if resp, body := h.do("GET", "/v1/intents/slow?wait=soon", ""); resp.StatusCode != 400 {
		t.Fatalf("a bad wait: %d %s", resp.StatusCode, body)
	}
}

func TestSubmitWithWaitOfAnIntentResolvedElsewhereAnswersWithItsResult(t *testing.T) {
	store := newFakeLookup()
	store.put(stored("", "again", schemas.OutcomeAnswered))
	h := newHarness(t, withOption(api.WithLookup(store)))
	resp, body := h.do("POST", "/v1/intents?wait=10s", `{"intent_id":"again","intent_type":"echo","payload":{}}`)
	if resp.StatusCode != 200 || decode[schemas.IntentResult](t, body).Timeline.ResolvedAt != 105 {
		t.Fatalf("POST ?wait: %d %s", resp.StatusCode, body)
	}
}

func TestSubscribeByIDSendsAResultResolvedElsewhereOnce(t *testing.T) {
	store := newFakeLookup()
	store.put(stored("", "old", schemas.OutcomeAnswered))
	h := newHarness(t, withOption(api.WithLookup(store)))
	c := h.dial(nil)
	c.subscribe(`{"intent_ids":["old","new"]}`)
	if m := c.expect("result"); m.Result == nil || m.Result.IntentID != "old" {
		t.Fatalf("stored result: %+v", m)
	}
	// The feed brings the same result again (read live while it was
	// looked up): the subscription has ended, so it is not sent twice.
	h.results.Add(stored("", "old", schemas.OutcomeAnswered).Result)
	h.results.Add(result("new", "echo", ""))
	if m := c.expect("result"); m.Result.IntentID != "new" {
		t.Fatalf("after the stored result: %+v", m.Result)
	}
	c.barrier()
}

func TestAResultInMemoryGetsItsTimeoutEventFromTheStore(t *testing.T) {
	store := newFakeLookup()
	st := stored("", "late", schemas.OutcomeFallbackStatic)
	st.Timeout = &schemas.IntentTimeout{
		IntentID: "late", IntentType: "echo", Agent: "agent-a", Deadline: 1100, TimedOutAt: 1101,
		Reason: schemas.ReasonDeadline, Fallback: schemas.FallbackStatic,
	}
	store.put(st)
	h := newHarness(t, withOption(api.WithLookup(store)))
	h.results.Add(st.Result) // read live; its timeout event came before this instance started
	_, body := h.do("GET", "/v1/intents/late", "")
	if b := decode[intentBody](t, body); b.Status != "resolved" || !strings.Contains(events(b), "timed_out") {
		t.Fatalf("GET: %s", body)
	}
}

// An event stream of an intent that resolved before this instance read it
// gets the stored result as its one event and ends, rather than waiting
// for a result this instance will never read.
func TestEventsOfAnIntentResolvedElsewhereSendTheStoredResult(t *testing.T) {
	store := newFakeLookup()
	store.put(stored("", "old", schemas.OutcomeAnswered))
	h := newHarness(t, withOption(api.WithLookup(store)))
	h.sse("GET", "/v1/intents/old/events", "", nil).expectResult("old")
}
