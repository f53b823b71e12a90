package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// An intent is (tenant, intent_id): two tenants that use one id have two
// intents and two results, and the API keeps them apart on every route.

// rejected is tenant's result for id, rejected (what the router answers an
// intent of an unknown type with).
func rejected(id, tenant string) *schemas.IntentResult {
	r := tenantResult(id, tenant, "")
	r.Outcome, r.Answer = schemas.OutcomeRejected, nil
	r.Error = &schemas.ErrorInfo{Code: "unknown_intent_type", Message: "no such type"}
	return r
}

// getOutcome GETs id as hdr's caller and returns the status and the outcome
// (or "pending").
func (h *harness) getOutcome(id string, hdr http.Header) (int, string) {
	h.t.Helper()
	resp, b := h.doWith("GET", "/v1/intents/"+id, "", hdr)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, ""
	}
	v := decode[struct {
		Outcome string `json:"outcome"`
		Status  string `json:"status"`
		Tenant  string `json:"tenant"`
	}](h.t, b)
	if v.Status == "pending" {
		return resp.StatusCode, "pending"
	}
	return resp.StatusCode, v.Tenant + ":" + v.Outcome
}

// Finding 2's API half: globex's rejected X, arriving after acme's answered
// X (or before it), neither hides nor replaces acme's.
func TestAnotherTenantsResultNeverHidesYours(t *testing.T) {
	for _, order := range []string{"acme first", "globex first"} {
		t.Run(order, func(t *testing.T) {
			h := newHarness(t, withAuth(nil))
			mine, theirs := tenantResult("X", "acme", ""), rejected("X", "globex")
			if order == "acme first" {
				h.results.Add(mine)
				h.results.Add(theirs)
			} else {
				h.results.Add(theirs)
				h.results.Add(mine)
			}
			if st, got := h.getOutcome("X", bearer(keyAcme)); got != "acme:answered" {
				t.Fatalf("acme's GET X = %d %q, want its own answered result", st, got)
			}
			if st, got := h.getOutcome("X", bearer(keyGlobex)); got != "globex:rejected" {
				t.Fatalf("globex's GET X = %d %q, want its own rejected result", st, got)
			}
			// DELETE sees the caller's own result only.
			resp, b := h.doWith("DELETE", "/v1/intents/X", "", bearer(keyAcme))
			wantError(t, resp, b, http.StatusConflict, "already_resolved", "")
			if !strings.Contains(string(b), `"answered"`) {
				t.Fatalf("acme's DELETE X names another outcome: %s", b)
			}
			// ?wait returns the caller's own at once.
			resp, b = h.doWith("POST", "/v1/intents?wait=5s", `{"intent_id":"X","intent_type":"echo","payload":{}}`, bearer(keyGlobex))
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"rejected"`) {
				t.Fatalf("globex's ?wait on X = %d %s, want its rejected result", resp.StatusCode, b)
			}
		})
	}
}

// A ?wait for acme's X is not woken by globex's X: it waits on for its own.
func TestWaitIsNotEndedByAnotherTenantsResult(t *testing.T) {
	h := newHarness(t, withAuth(nil))
	type answer struct {
		resp *http.Response
		body []byte
	}
	done := make(chan answer, 1)
	go func() {
		resp, body := h.doWith("POST", "/v1/intents?wait=5s", `{"intent_id":"X","intent_type":"echo","payload":{}}`, bearer(keyAcme))
		done <- answer{resp, body}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := h.blockUntilWaiting(ctx, 1); err != nil {
		t.Fatalf("the request never started waiting: %v", err)
	}
	h.results.Add(rejected("X", "globex"))
	h.results.Add(tenantResult("X", "acme", ""))
	a := <-done
	if a.resp.StatusCode != http.StatusOK || !strings.Contains(string(a.body), `"answered"`) {
		t.Fatalf("acme's ?wait = %d %s, want its own answered result", a.resp.StatusCode, a.body)
	}
}

// Subscribing by id after both tenants' results are stored sends the
// subscriber its own tenant's.
func TestSubscribeByIDFindsYourStoredResult(t *testing.T) {
	h := newHarness(t, withAuth(nil))
	h.results.Add(tenantResult("X", "acme", ""))
	h.results.Add(rejected("X", "globex"))
	conn, _, body := h.tryDial("", bearer(keyAcme))
	if conn == nil {
		t.Fatalf("dial refused: %s", body)
	}
	c := &wsClient{t: t, conn: conn}
	c.subscribe(`{"intent_ids":["X"]}`)
	if m := c.expect("result"); m.Result.Tenant == nil || *m.Result.Tenant != "acme" || m.Result.Outcome != schemas.OutcomeAnswered {
		t.Fatalf("acme got %+v, want its own answered X", m.Result)
	}
}

// Timeout events are kept per (tenant, id): globex's event for X does not
// push acme's out of acme's GET.
func TestTimeoutEventsAreKeptPerTenant(t *testing.T) {
	h := newHarness(t, withAuth(nil))
	ev := func(tenant string) *schemas.IntentTimeout {
		return &schemas.IntentTimeout{
			IntentID: "X", IntentType: "echo", Agent: "agent-a", Reason: schemas.ReasonDeadline,
			Fallback: schemas.FallbackNone, Tenant: schemas.Ptr(tenant),
		}
	}
	h.results.AddTimeout(0, 0, ev("acme"))
	h.results.AddTimeout(0, 1, ev("globex"))
	for _, hdr := range []http.Header{bearer(keyAcme), bearer(keyGlobex)} {
		if st, got := h.getOutcome("X", hdr); got != "pending" {
			t.Fatalf("GET X with %v = %d %q, want pending with its own timeout event", hdr, st, got)
		}
	}
}

// Two tenants submit X: each is in flight for its own tenant, and one's
// result does not land the other's flight.
func TestInFlightIsPerTenant(t *testing.T) {
	h := newHarness(t, withAuth(nil))
	for _, key := range []string{keyAcme, keyGlobex} {
		if resp, b := h.doWith("POST", "/v1/intents", `{"intent_id":"X","intent_type":"echo","payload":{}}`, bearer(key)); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("submit: %d %s", resp.StatusCode, b)
		}
	}
	if st, got := h.getOutcome("X", bearer(keyGlobex)); got != "pending" {
		t.Fatalf("globex's GET X = %d %q, want pending (it submitted X too)", st, got)
	}
	h.results.Add(rejected("X", "globex"))
	if st, got := h.getOutcome("X", bearer(keyAcme)); got != "pending" {
		t.Fatalf("acme's GET X after globex's result = %d %q, want still pending", st, got)
	}
	inFlight := func(key string) int64 {
		resp, b := h.doWith("GET", "/v1/intent-types", "", bearer(key))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/intent-types: %d %s", resp.StatusCode, b)
		}
		for _, v := range decode[map[string][]struct {
			Name   string `json:"name"`
			Counts struct {
				InFlight int64 `json:"in_flight"`
			} `json:"counts"`
		}](t, b)["intent_types"] {
			if v.Name == "echo" {
				return v.Counts.InFlight
			}
		}
		return 0
	}
	if a, g := inFlight(keyAcme), inFlight(keyGlobex); a != 1 || g != 0 {
		t.Fatalf("in flight: acme %d, globex %d; want 1 and 0", a, g)
	}
}

// Without authentication there are no callers' tenants: GET finds an
// intent whatever tenant its record names.
func TestAuthOffFindsAnyTenantsIntent(t *testing.T) {
	h := newHarness(t)
	h.results.Add(tenantResult("X", "acme", ""))
	if st, got := h.getOutcome("X", nil); got != "acme:answered" {
		t.Fatalf("GET X = %d %q, want acme's result", st, got)
	}
}

// Idempotency is per tenant: with authentication on, the same explicit id
// or Idempotency-Key from two tenants is two intents, both published; and
// without it, the body's tenant (the intent's) tells them apart as well.
func TestIdempotencyIsPerTenant(t *testing.T) {
	h := newHarness(t, withAuth(nil))
	for _, key := range []string{keyAcme, keyGlobex, keyAcme} {
		hdr := bearer(key)
		hdr.Set("Idempotency-Key", "k-1")
		if resp, b := h.doWith("POST", "/v1/intents", `{"intent_id":"X","intent_type":"echo","payload":{}}`, hdr); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("submit: %d %s", resp.StatusCode, b)
		}
	}
	if n := len(h.pub.Requests()); n != 2 {
		t.Fatalf("published %d, want 2: one per tenant (acme's repeat publishes nothing)", n)
	}

	open := newHarness(t)
	for _, tenant := range []string{"acme", "globex"} {
		if resp, b := open.do("POST", "/v1/intents", `{"intent_id":"X","intent_type":"echo","payload":{},"tenant":"`+tenant+`"}`); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("auth off, tenant %s: %d %s", tenant, resp.StatusCode, b)
		}
	}
	if n := len(open.pub.Requests()); n != 2 {
		t.Fatalf("auth off: published %d, want 2", n)
	}
}
