package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// tenantResult is a stored result of a tenant.
func tenantResult(id, tenant, session string) *schemas.IntentResult {
	r := result(id, "echo", session)
	if tenant != "" {
		r.Tenant = schemas.Ptr(tenant)
	}
	return r
}

func TestSubmitStampsTheCredentialsTenant(t *testing.T) {
	h := newHarness(t, withAuth(nil))
	for _, body := range []string{
		`{"intent_type":"echo","payload":{}}`,
		`{"intent_type":"echo","payload":{},"tenant":"acme"}`,
	} {
		if resp, b := h.doWith("POST", "/v1/intents", body, bearer(keyAcme)); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%s: %d %s", body, resp.StatusCode, b)
		}
	}
	resp, b := h.doWith("POST", "/v1/intents", `{"intent_type":"echo","payload":{},"tenant":"globex"}`, bearer(keyAcme))
	wantRefusal(t, resp, b, http.StatusForbidden, "forbidden_tenant")
	reqs := h.pub.Requests()
	if len(reqs) != 2 {
		t.Fatalf("published %d requests, want 2 (the refused one is not published)", len(reqs))
	}
	for _, r := range reqs {
		if r.Tenant == nil || *r.Tenant != "acme" {
			t.Fatalf("published tenant %v, want acme", r.Tenant)
		}
	}
}

func TestGetAnotherTenantsIntentIsNotFound(t *testing.T) {
	h := newHarness(t, withAuth(nil))
	h.results.Add(tenantResult("acme-1", "acme", ""))
	h.results.Add(tenantResult("untenanted", "", ""))

	resp, mine := h.doWith("GET", "/v1/intents/acme-1", "", bearer(keyAcme))
	if resp.StatusCode != http.StatusOK || decode[schemas.IntentResult](t, mine).IntentID != "acme-1" {
		t.Fatalf("own intent: %d %s", resp.StatusCode, mine)
	}
	_, unknown := h.doWith("GET", "/v1/intents/nope-1", "", bearer(keyGlobex))
	for _, id := range []string{"acme-1", "untenanted"} {
		resp, theirs := h.doWith("GET", "/v1/intents/"+id, "", bearer(keyGlobex))
		wantError(t, resp, theirs, http.StatusNotFound, "not_found", "")
		// Word for word the answer for an id nobody used.
		if strings.ReplaceAll(string(theirs), id, "nope-1") != string(unknown) {
			t.Fatalf("another tenant's intent answers\n%s\nan unknown one\n%s", theirs, unknown)
		}
	}
}

func TestWaitNeverReturnsAnotherTenantsResult(t *testing.T) {
	h := newHarness(t, withAuth(nil))
	h.results.Add(tenantResult("shared-id", "acme", ""))
	type answer struct {
		resp *http.Response
		body []byte
	}
	done := make(chan answer, 1)
	go func() {
		resp, body := h.doWith("POST", "/v1/intents?wait=5s", `{"intent_id":"shared-id","intent_type":"echo","payload":{}}`, bearer(keyGlobex))
		done <- answer{resp, body}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := h.blockUntilWaiting(ctx, 1); err != nil { // it waits, as for a result that has not come
		t.Fatalf("the request never started waiting: %v", err)
	}
	h.clock.Advance(5e9)
	a := <-done
	if a.resp.StatusCode != http.StatusAccepted || !strings.Contains(string(a.body), `"pending"`) {
		t.Fatalf("got %d %s, want 202 pending", a.resp.StatusCode, a.body)
	}
	// Another tenant's result arriving during the wait is not handed over
	// either: the request waits out its time for its own.
	go func() {
		resp, body := h.doWith("POST", "/v1/intents?wait=5s", `{"intent_id":"late-id","intent_type":"echo","payload":{}}`, bearer(keyGlobex))
		done <- answer{resp, body}
	}()
	if err := h.blockUntilWaiting(ctx, 2); err != nil {
		t.Fatalf("the request never started waiting: %v", err)
	}
	h.results.Add(tenantResult("late-id", "acme", ""))
	h.clock.Advance(5e9)
	a = <-done
	if a.resp.StatusCode != http.StatusAccepted || !strings.Contains(string(a.body), `"pending"`) {
		t.Fatalf("got %d %s, want 202 pending", a.resp.StatusCode, a.body)
	}
	// Its own tenant gets it at once.
	resp, body := h.doWith("POST", "/v1/intents?wait=5s", `{"intent_id":"shared-id","intent_type":"echo","payload":{}}`, bearer(keyAcme))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("own result: %d %s", resp.StatusCode, body)
	}
}

// TestStreamTenantIsolation: a connection of tenant acme subscribed to
// everything it can name (globex's intent ids, the shared session and intent
// type) never receives a result of globex or of no tenant, while globex's
// connection receives its own.
func TestStreamTenantIsolation(t *testing.T) {
	h := newHarness(t, withAuth(nil))
	acme, _, _ := h.tryDial("", bearer(keyAcme))
	globex, _, _ := h.tryDial("", bearer(keyGlobex))
	if acme == nil || globex == nil {
		t.Fatal("dial refused")
	}
	a, g := &wsClient{t: t, conn: acme}, &wsClient{t: t, conn: globex}
	h.results.Add(tenantResult("g-stored", "globex", "s"))
	a.subscribe(`{"intent_ids":["g-stored","g-1","a-1"],"session_id":"s","intent_type":"echo"}`)
	g.subscribe(`{"session_id":"s"}`)

	h.results.Add(tenantResult("g-1", "globex", "s"))
	h.results.Add(tenantResult("none-1", "", "s"))
	h.results.Add(tenantResult("a-1", "acme", "s"))
	h.results.Add(tenantResult("g-2", "globex", "other"))
	h.results.Add(tenantResult("a-2", "acme", "other"))
	for _, want := range []string{"a-1", "a-2"} {
		if m := a.expect("result"); m.Result.IntentID != want || *m.Result.Tenant != "acme" {
			t.Fatalf("acme got %+v, want %s", m.Result, want)
		}
	}
	a.barrier() // nothing else was queued for acme
	if m := g.expect("result"); m.Result.IntentID != "g-1" {
		t.Fatalf("globex got %+v", m.Result)
	}
	g.barrier()

	// Without authentication there are no tenants: everything is visible.
	open := newHarness(t)
	c := open.dial(nil)
	c.subscribe(`{"session_id":"s"}`)
	open.results.Add(tenantResult("g-1", "globex", "s"))
	open.results.Add(tenantResult("a-1", "acme", "s"))
	for _, want := range []string{"g-1", "a-1"} {
		if m := c.expect("result"); m.Result.IntentID != want {
			t.Fatalf("auth off got %+v, want %s", m.Result, want)
		}
	}
}

// TestJWTTenantScopesTheStream: a JWT's tenant claim scopes a browser's
// stream (credential in the subprotocol) like an API key's tenant.
func TestJWTTenantScopesTheStream(t *testing.T) {
	h := newHarness(t, withAuth(nil))
	tok := sign(t, jwt.SigningMethodHS256, hsSecret, claims(h.clock.Now(), "globex", nil))
	conn, _, body := h.tryDial("", http.Header{"Origin": {h.ts.URL}}, "switchboard.v1", "bearer."+tok)
	if conn == nil {
		t.Fatalf("dial refused: %s", body)
	}
	c := &wsClient{t: t, conn: conn}
	c.subscribe(`{"intent_type":"echo"}`)
	h.results.Add(tenantResult("a-1", "acme", ""))
	h.results.Add(tenantResult("g-1", "globex", ""))
	if m := c.expect("result"); m.Result.IntentID != "g-1" {
		t.Fatalf("got %+v", m.Result)
	}
}

// A cancel acts for the caller's tenant: another tenant's resolved intent is
// not found, and the cancel record of a pending one carries the caller's
// tenant, which the router checks against the intent's.
func TestCancelActsForTheCredentialsTenant(t *testing.T) {
	h := newHarness(t, withAuth(nil))
	h.results.Add(tenantResult("acme-1", "acme", ""))
	// Another tenant's resolved intent is answered word for word as an
	// unknown one, and its record carries the caller's tenant (the router
	// ignores it).
	resp, theirs := h.doWith("DELETE", "/v1/intents/acme-1", "", bearer(keyGlobex))
	_, unknown := h.doWith("DELETE", "/v1/intents/nope-1", "", bearer(keyGlobex))
	if resp.StatusCode != http.StatusAccepted || strings.ReplaceAll(string(theirs), "acme-1", "nope-1") != string(unknown) {
		t.Fatalf("another tenant's resolved intent: %d %s; an unknown one: %s", resp.StatusCode, theirs, unknown)
	}
	resp, b := h.doWith("DELETE", "/v1/intents/acme-1", "", bearer(keyAcme))
	wantError(t, resp, b, http.StatusConflict, "already_resolved", "")

	resp, b = h.doWith("DELETE", "/v1/intents/pending-1", "", bearer(keyGlobex))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel of a pending intent: %d %s", resp.StatusCode, b)
	}
	cancels := h.pub.Cancels()
	if len(cancels) != 3 {
		t.Fatalf("published %+v, want three cancels", cancels)
	}
	for _, c := range cancels {
		if c.Tenant != "globex" {
			t.Fatalf("published %+v, want every cancel for tenant globex", cancels)
		}
	}
}

// Timeout events are streamed only to their intent's tenant, like results
// (an event without a tenant belongs to no tenant).
func TestStreamTimeoutEventsStayWithTheirTenant(t *testing.T) {
	h := newHarness(t, withAuth(nil))
	conn, _, _ := h.tryDial("", bearer(keyAcme))
	if conn == nil {
		t.Fatal("dial refused")
	}
	a := &wsClient{t: t, conn: conn}
	a.subscribe(`{"intent_type":"echo","session_id":"s"}`)
	timeout := func(id, tenant string) *schemas.IntentTimeout {
		to := &schemas.IntentTimeout{IntentID: id, IntentType: "echo", Agent: "agent-a", Reason: "deadline", Fallback: "none", SessionID: schemas.Ptr("s")}
		if tenant != "" {
			to.Tenant = schemas.Ptr(tenant)
		}
		return to
	}
	h.results.AddTimeout(0, 0, timeout("g-1", "globex"))
	h.results.AddTimeout(0, 1, timeout("n-1", ""))
	h.results.AddTimeout(0, 2, timeout("a-1", "acme"))
	if m := a.expect("timeout"); m.Timeout.IntentID != "a-1" {
		t.Fatalf("acme got the timeout of %s", m.Timeout.IntentID)
	}
	a.barrier()
}

// TestIntentSubscriptionHidesAnotherTenantsResult: subscribing by intent id
// to another tenant's intent behaves as for an intent whose result has not
// come: the subscription is held (it counts against max_subscriptions) both
// when the result is already stored and when it arrives afterwards.
func TestIntentSubscriptionHidesAnotherTenantsResult(t *testing.T) {
	h := newHarness(t, withAuth(nil), withConfig(func(c *api.Config) { c.MaxSubscriptions = 2 }))
	h.results.Add(tenantResult("g-stored", "globex", ""))
	dial := func() *wsClient {
		conn, _, body := h.tryDial("", bearer(keyAcme))
		if conn == nil {
			t.Fatalf("dial refused: %s", body)
		}
		return &wsClient{t: t, conn: conn}
	}
	full := func(c *wsClient, what string) {
		t.Helper()
		c.sendText(`{"subscribe":{"intent_ids":["a-1"]}}`)
		if m := c.read(); m.Type != "error" || m.Error.Code != "too_many_subscriptions" {
			t.Fatalf("%s: the third subscription got %q %+v, want too_many_subscriptions (the other tenant's intent's subscription was dropped)", what, m.Type, m)
		}
	}

	stored := dial()
	stored.subscribe(`{"intent_ids":["g-stored"]}`)
	stored.subscribe(`{"intent_ids":["a-0"]}`)
	full(stored, "stored result")

	later := dial()
	later.subscribe(`{"intent_ids":["g-1","a-0"]}`)
	h.results.Add(tenantResult("g-1", "globex", ""))
	full(later, "result after subscribe")
}

// TestAgentsAndIntentTypesCountPerTenant: GET /v1/agents and
// /v1/intent-types answer with the caller's tenant's counts, list
// configured names always and unconfigured ones only from its own results.
func TestAgentsAndIntentTypesCountPerTenant(t *testing.T) {
	h := newHarness(t, withAuth(nil), withOption(api.WithCatalog(api.Catalog{
		Agents:      []api.AgentInfo{{Name: "agent-a", Topic: "mcp.agent.a.request"}},
		IntentTypes: []api.IntentTypeInfo{{Name: "echo", Agent: "agent-a", TimeoutMs: 5000, Fallback: "none"}},
	})))
	if resp, b := h.doWith("POST", "/v1/intents", `{"intent_id":"a-flying","intent_type":"echo","payload":{}}`, bearer(keyAcme)); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d %s", resp.StatusCode, b)
	}
	h.results.Add(tenantResult("a-1", "acme", ""))
	g := tenantResult("g-1", "globex", "")
	g.IntentType, g.Agent = "globex-only", "globex-agent"
	h.results.Add(g)
	h.results.AddTimeout(0, 0, &schemas.IntentTimeout{IntentID: "g-2", IntentType: "echo", Agent: "agent-a", Reason: "deadline", Fallback: "none", Tenant: schemas.Ptr("globex")})

	type view struct {
		Name   string `json:"name"`
		Counts struct {
			Resolved int64 `json:"resolved"`
			TimedOut int64 `json:"timeout_events"`
			InFlight int64 `json:"in_flight"`
		} `json:"counts"`
	}
	list := func(key, path string, hdr http.Header) map[string]view {
		t.Helper()
		resp, b := h.doWith("GET", path, "", hdr)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		out := map[string]view{}
		for _, v := range decode[map[string][]view](t, b)[key] {
			out[v.Name] = v
		}
		return out
	}
	acmeTypes := list("intent_types", "/v1/intent-types", bearer(keyAcme))
	if len(acmeTypes) != 1 || acmeTypes["echo"].Counts.Resolved != 1 || acmeTypes["echo"].Counts.InFlight != 1 || acmeTypes["echo"].Counts.TimedOut != 0 {
		t.Fatalf("acme's intent types: %+v", acmeTypes)
	}
	if a := list("agents", "/v1/agents", bearer(keyAcme)); len(a) != 1 || a["agent-a"].Counts.Resolved != 1 {
		t.Fatalf("acme's agents: %+v", a)
	}
	globexTypes := list("intent_types", "/v1/intent-types", bearer(keyGlobex))
	if len(globexTypes) != 2 || globexTypes["echo"].Counts.Resolved != 0 || globexTypes["echo"].Counts.InFlight != 0 ||
		globexTypes["echo"].Counts.TimedOut != 1 || globexTypes["globex-only"].Counts.Resolved != 1 {
		t.Fatalf("globex's intent types: %+v", globexTypes)
	}
	if a := list("agents", "/v1/agents", bearer(keyGlobex)); len(a) != 2 || a["agent-a"].Counts.Resolved != 0 || a["globex-agent"].Counts.Resolved != 1 {
		t.Fatalf("globex's agents: %+v", a)
	}
}
