package router_test

import (
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// An intent's identity is (tenant, intent_id): these tests play tenants that
// try to reach into each other's intents, and records that try to give one
// intent a second result.

func tenantIs(t string) func(*schemas.IntentRequest) {
	return func(r *schemas.IntentRequest) { r.Tenant = &t }
}

// resultsFor returns every result keyed id whose tenant is tenant ("" for
// none).
func (h *harness) resultsFor(tenant, id string) []*schemas.IntentResult {
	h.t.Helper()
	var found []*schemas.IntentResult
	for _, o := range h.sink.Outputs(results) {
		if string(o.Key) != id {
			continue
		}
		var res schemas.IntentResult
		if err := h.codec.Decode(o.Value, &res); err != nil {
			h.t.Fatal(err)
		}
		got := ""
		if res.Tenant != nil {
			got = *res.Tenant
		}
		if got == tenant {
			found = append(found, &res)
		}
	}
	return found
}

// A second record for an intent that has its result, whatever is wrong with
// it (an unknown type, an unknown target agent, bytes that do not decode),
// is dead-lettered and counted as a duplicate, never answered with a second
// result. Another tenant's record with the same id is another intent: its
// rejection is its first result.
func TestRejectionNeverResolvesAnIntentTwice(t *testing.T) {
	both(t, testRejectionNeverResolvesAnIntentTwice)
}

func testRejectionNeverResolvesAnIntentTwice(t *testing.T, delivery string) {
	h := start(t, testConfig, delivery)
	h.request("x-1", "echo", `{}`, tenantIs("acme"))
	h.wait(echoTopic, 1)
	h.answer("x-1", "echo", `{"ok":1}`)
	h.wait(results, 1)

	h.request("x-1", "no_such_type", `{}`, tenantIs("acme"))
	h.request("x-1", "echo", `{}`, tenantIs("acme"), func(r *schemas.IntentRequest) { r.TargetAgent = schemas.Ptr("nobody") })
	h.wait(dlq, 2)
	h.settle()
	if got := h.resultsFor("acme", "x-1"); len(got) != 1 || got[0].Outcome != schemas.OutcomeAnswered {
		t.Fatalf("acme's x-1 has %d results: %+v", len(got), got)
	}
	if got := h.counter("switchboard_intents_duplicate_total"); got != 2 {
		t.Fatalf("duplicates counted = %v, want 2", got)
	}
	if n := h.sink.Count(dlq); n != 3 { // the two, and settle's marker
		t.Fatalf("%d dead letters, want the two rejected duplicates and the marker", n)
	}

	// globex's x-1 is another intent: rejected once, then a duplicate.
	h.request("x-1", "no_such_type", `{}`, tenantIs("globex"))
	h.request("x-1", "no_such_type", `{}`, tenantIs("globex"))
	h.wait(dlq, 5)
	h.settle()
	if got := h.resultsFor("globex", "x-1"); len(got) != 1 || got[0].Outcome != schemas.OutcomeRejected {
		t.Fatalf("globex's x-1 has %d results: %+v", len(got), got)
	}

	// A record that does not decode is resolved under its key, without a
	// tenant: once.
	h.pushRaw(requests, "x-1", []byte(`{"intent_id":`))
	h.pushRaw(requests, "x-1", []byte(`{"intent_id":`))
	h.wait(dlq, 8)
	h.settle()
	if got := h.resultsFor("", "x-1"); len(got) != 1 || got[0].Outcome != schemas.OutcomeRejected {
		t.Fatalf("the tenant-less x-1 has %d results: %+v", len(got), got)
	}
	// And a valid tenant-less x-1 after its rejection is a duplicate too.
	h.request("x-1", "echo", `{}`)
	h.settle()
	if n := h.sink.Count(echoTopic); n != 1 {
		t.Fatalf("dispatched %d times", n)
	}
	if got := h.resultsFor("", "x-1"); len(got) != 1 {
		t.Fatalf("the tenant-less x-1 has %d results", len(got))
	}
}

// Id squatting: a tenant that uses an id first does not take it from
// another tenant. globex posts x-1 (of an unknown type, then of a served
// one); acme's x-1 is dispatched and answered all the same.
func TestAnotherTenantsIDIsNotADuplicate(t *testing.T) { both(t, testAnotherTenantsIDIsNotADuplicate) }

func testAnotherTenantsIDIsNotADuplicate(t *testing.T, delivery string) {
	h := start(t, testConfig, delivery)
	h.request("x-1", "no_such_type", `{}`, tenantIs("globex"))
	h.wait(results, 1)
	h.request("x-1", "echo", `{"who":"acme"}`, tenantIs("acme"))
	ar := h.agentRequest(echoTopic, 1)
	if ar.IntentID != "x-1" || ar.Tenant == nil || *ar.Tenant != "acme" {
		t.Fatalf("acme's x-1 dispatched as %+v", ar)
	}
	h.answer("x-1", "echo", `{"ok":"acme"}`)
	h.wait(results, 2)
	if got := h.resultsFor("acme", "x-1"); len(got) != 1 || got[0].Outcome != schemas.OutcomeAnswered {
		t.Fatalf("acme's x-1: %+v", got)
	}
	if got := h.counter("switchboard_intents_duplicate_total"); got != 0 {
		t.Fatalf("duplicates counted = %v", got)
	}
}

// A response that names another agent than the one its intent was
// dispatched to is dead-lettered (invalid_response) and counted, never
// credited: the intent stays pending for its own agent's answer.
func TestResponseFromTheWrongAgentIsNotCredited(t *testing.T) {
	both(t, testResponseFromTheWrongAgentIsNotCredited)
}

func testResponseFromTheWrongAgentIsNotCredited(t *testing.T, delivery string) {
	h := start(t, testConfig, delivery)
	h.request("w-1", "echo", `{}`)
	h.wait(echoTopic, 1)
	h.answer("w-1", "slow", `{"forged":true}`)
	dl := h.wait(dlq, 1)
	if !hasHeader(dl, port.HeaderErrorClass, router.ClassInvalidResponse) {
		t.Fatalf("the forged response is not dead-lettered invalid_response: %v", dl.Headers)
	}
	if got := h.counter("switchboard_responses_invalid_total", "reason", "agent"); got != 1 {
		t.Fatalf("invalid responses (agent) = %v", got)
	}
	if n := h.sink.Count(results); n != 0 {
		t.Fatalf("the forged response resolved the intent")
	}
	h.answer("w-1", "echo", `{"ok":1}`)
	if res := h.result(1); res.Outcome != schemas.OutcomeAnswered || string(*res.Answer) != `{"ok":1}` {
		t.Fatalf("result %+v", res)
	}
}

// A response for an attempt that was never dispatched is not credited.
func TestResponseForAnAttemptNeverDispatchedIsNotCredited(t *testing.T) {
	h := start(t, testConfig, "at_least_once")
	h.request("a-1", "echo", `{}`)
	h.wait(echoTopic, 1)
	a := schemas.JSON(`{"forged":true}`)
	h.push(responses, "a-1", &schemas.AgentResponse{RequestID: "a-1", Agent: "echo", Status: schemas.StatusOK, Answer: &a, Attempt: schemas.Ptr[int32](7)})
	h.wait(dlq, 1)
	if got := h.counter("switchboard_responses_invalid_total", "reason", "attempt"); got != 1 {
		t.Fatalf("invalid responses (attempt) = %v", got)
	}
	h.settle()
	if n := h.sink.Count(results); n != 0 {
		t.Fatalf("a response for attempt 7 of an intent dispatched once resolved it")
	}
}

// A cancel record is namespaced by its tenant like an intent: one without a
// tenant cancels only the tenant-less intent of that id, never a tenant's.
func TestCancelWithoutATenantLeavesATenantsIntent(t *testing.T) {
	h := startPressure(t, "at_least_once")
	h.request("c-1", "echo", `{}`, tenantIs("acme"))
	h.wait(echoTopic, 1)
	h.cancelRecord("c-1", []byte(`{"intent_id":"c-1","reason":"not yours"}`))
	h.settle()
	if n := h.sink.Count(results); n != 0 {
		t.Fatalf("a tenant-less cancel resolved acme's intent")
	}
	h.answer("c-1", "echo", `{"ok":1}`)
	if res := h.result(1); res.Outcome != schemas.OutcomeAnswered {
		t.Fatalf("result %+v", res)
	}
}

// answerAs pushes an ok response that names a tenant (nil: none).
func (h *harness) answerAs(id, agent string, tenant *string, answer string) {
	h.t.Helper()
	a := schemas.JSON(answer)
	h.push(responses, id, &schemas.AgentResponse{RequestID: id, Agent: agent, Status: schemas.StatusOK, Answer: &a, Tenant: tenant})
}

// Two tenants' intents of one id are two intents: each is dispatched,
// answered by the response that names its tenant, and cancelled by its own
// tenant's cancel only. A response that names no tenant is ambiguous while
// both are dispatched to its agent; one that names a third tenant is
// another tenant's.
func TestTwoTenantsOneIDArePairedByTenant(t *testing.T) {
	both(t, testTwoTenantsOneIDArePairedByTenant)
}

func testTwoTenantsOneIDArePairedByTenant(t *testing.T, delivery string) {
	h := start(t, testConfig, delivery)
	h.request("x-1", "echo", `{"who":"acme"}`, tenantIs("acme"))
	h.request("x-1", "echo", `{"who":"globex"}`, tenantIs("globex"))
	h.request("x-1", "echo", `{"who":"nobody"}`)
	for n := 1; n <= 3; n++ {
		h.wait(echoTopic, n)
	}
	h.answerAs("x-1", "echo", nil, `{"to":"?"}`)
	h.answerAs("x-1", "echo", schemas.Ptr("initech"), `{"to":"initech"}`)
	h.wait(dlq, 2)
	if a, b := h.counter("switchboard_responses_invalid_total", "reason", "ambiguous"), h.counter("switchboard_responses_invalid_total", "reason", "tenant"); a != 1 || b != 1 {
		t.Fatalf("invalid responses: ambiguous %v, tenant %v; want 1 each", a, b)
	}
	h.answerAs("x-1", "echo", schemas.Ptr("globex"), `{"to":"globex"}`)
	h.wait(results, 1)
	h.answerAs("x-1", "echo", schemas.Ptr(""), `{"to":"nobody"}`)
	h.wait(results, 2)
	h.cancelRecord("x-1", []byte(`{"intent_id":"x-1","tenant":"globex"}`)) // resolved: ignored
	h.cancelRecord("x-1", []byte(`{"intent_id":"x-1","tenant":"acme","reason":"gone"}`))
	h.wait(results, 3)
	h.settle()
	for tenant, want := range map[string]string{"globex": `{"to":"globex"}`, "": `{"to":"nobody"}`} {
		got := h.resultsFor(tenant, "x-1")
		if len(got) != 1 || got[0].Outcome != schemas.OutcomeAnswered || string(*got[0].Answer) != want {
			t.Fatalf("tenant %q: %d results %+v", tenant, len(got), got)
		}
	}
	if got := h.resultsFor("acme", "x-1"); len(got) != 1 || got[0].Outcome != schemas.OutcomeCancelled {
		t.Fatalf("acme: %+v", got)
	}
	// All three were sent to echo: a late response without a tenant stays
	// ambiguous, and resolves nothing again.
	h.answerAs("x-1", "echo", nil, `{"late":1}`)
	h.wait(dlq, 4) // the marker was the third
	if n := h.sink.Count(results); n != 3 {
		t.Fatalf("%d results", n)
	}
}

// The pending changelog keeps two tenants' intents of one id apart: each
// has its own key (the bare id without a tenant, tenant and id with one),
// in the partition of the request, and both are restored by the next owner.
func TestChangelogKeepsTwoTenantsOneIDApart(t *testing.T) {
	both(t, testChangelogKeepsTwoTenantsOneIDApart)
}

func testChangelogKeepsTwoTenantsOneIDApart(t *testing.T, delivery string) {
	a := start(t, testConfig, delivery)
	a.request("x-1", "echo", `{}`, tenantIs("acme"))
	a.request("x-1", "echo", `{}`)
	a.handOver()
	outs, err := a.sink.WaitFor(a.ctx, pendingT, 2)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, o := range outs {
		keys[string(o.Key)] = true
		if o.Partition == nil || *o.Partition != 0 {
			t.Fatalf("changelog record %q not written to the request's partition: %v", o.Key, o.Partition)
		}
	}
	if !keys["x-1"] || !keys[intents.Scoped("acme", "x-1")] {
		t.Fatalf("changelog keys %v", keys)
	}

	b := start(t, testConfig, delivery, router.WithRestorer(a.changelog()))
	b.settle()
	if got := b.counter("switchboard_intents_restored_total"); got != 2 {
		t.Fatalf("restored %v intents, want 2", got)
	}
	b.answerAs("x-1", "echo", schemas.Ptr("acme"), `{"to":"acme"}`)
	b.answerAs("x-1", "echo", schemas.Ptr(""), `{"to":"nobody"}`)
	b.wait(results, 2)
	if got := b.resultsFor("acme", "x-1"); len(got) != 1 || string(*got[0].Answer) != `{"to":"acme"}` {
		t.Fatalf("acme: %+v", got)
	}
	// Each resolution rewrites its own record (the marker follows its
	// result: wait for both).
	markers, err := b.sink.WaitFor(b.ctx, pendingT, 2)
	if err != nil {
		t.Fatalf("waiting for the resolution markers: %v (have %d)", err, len(markers))
	}
	var resolved []string
	for _, o := range markers {
		if b.resolvedMarker(o, string(o.Key)) {
			resolved = append(resolved, string(o.Key))
		}
	}
	if len(resolved) != 2 || resolved[0] == resolved[1] {
		t.Fatalf("resolved markers under %q", resolved)
	}
}

// A record restored from a changelog written before tenants were scoped is
// keyed by the bare id although its intent has a tenant: its resolution and
// its tombstone keep that key, so no stale record outlives it.
func TestRestoredRecordKeepsItsChangelogKey(t *testing.T) {
	a := start(t, testConfig, "at_least_once")
	pi := &schemas.PendingIntent{
		IntentID: "old-1", IntentType: "echo", Agent: "echo", RecordTs: t0.UnixMilli(), ReceivedAt: t0.UnixMilli(),
		DispatchedAt: t0.UnixMilli(), Deadline: t0.Add(time.Second).UnixMilli(), Attempt: 1, Payload: "{}", Tenant: schemas.Ptr("acme"),
	}
	// What a router of the last release wrote: the bare id as the key.
	v, err := a.codec.Encode(pendingT, pi)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.sink.Produce(&port.Output{Topic: pendingT, Key: []byte("old-1"), Value: v}, nil); err != nil {
		t.Fatal(err)
	}
	a.stop()

	b := start(t, strings.Replace(testConfig, "router:\n", "router:\n  dedup_window: 7s\n", 1), "at_least_once", router.WithRestorer(a.changelog()))
	b.answerAs("old-1", "echo", schemas.Ptr("acme"), `{}`)
	if res := b.result(1); res.Tenant == nil || *res.Tenant != "acme" || res.Outcome != schemas.OutcomeAnswered {
		t.Fatalf("result %+v", res)
	}
	done := b.wait(pendingT, 1)
	if string(done.Key) != "old-1" || !b.resolvedMarker(done, "old-1") {
		t.Fatalf("the resolution was written under %q", done.Key)
	}
	for i := 0; i < 10; i++ { // past the dedup window, a generation at a time
		b.advance(time.Second)
		b.settle()
	}
	tomb := b.wait(pendingT, 2)
	if string(tomb.Key) != "old-1" || tomb.Value != nil {
		t.Fatalf("tombstone under %q (value %q)", tomb.Key, tomb.Value)
	}
}

// The fallback cache's keys are scoped so that tenants never alias: tenant
// "a/b" with context_ref "c" and tenant "a" with "b/c" are two keys.
func TestFallbackCacheKeysDoNotAliasAcrossTenants(t *testing.T) {
	h := start(t, testConfig, "at_least_once")
	h.request("f-1", "fraud_check", `{}`, tenantIs("a/b"), func(r *schemas.IntentRequest) { r.ContextRef = schemas.Ptr("c") })
	h.wait(slowTopic, 1)
	h.answer("f-1", "slow", `{"decision":"for a/b"}`)
	h.wait(results, 1)
	h.request("f-2", "fraud_check", `{}`, tenantIs("a"), func(r *schemas.IntentRequest) { r.ContextRef = schemas.Ptr("b/c") })
	h.wait(slowTopic, 2)
	h.advance(301 * time.Millisecond)
	if res := h.result(2); res.Outcome != schemas.OutcomeFallbackStatic {
		t.Fatalf("tenant a got %s: %s", res.Outcome, *res.Answer)
	}
	cached := h.wait(config.DefaultFallback, 1)
	if string(cached.Key) != "fraud_check/"+intents.Scoped("a/b", "c") {
		t.Fatalf("fallback-cache topic key %q", cached.Key)
	}
}

// The one exception to one result per intent is an operator's repair: a
// request replayed from the dead-letter topic (switchboard dlq replay marks
// it) whose intent was rejected is served, its real result following the
// rejection. Replaying an intent that was served is still a duplicate, and
// so is the same request without the mark.
func TestReplayedRequestSupersedesItsRejection(t *testing.T) {
	h := start(t, testConfig, "at_least_once")
	h.request("r-1", "echo", `{}`, tenantIs("acme"), func(r *schemas.IntentRequest) { r.TargetAgent = schemas.Ptr("nobody") })
	h.wait(results, 1)
	h.request("r-1", "echo", `{}`, tenantIs("acme")) // not a replay: a duplicate
	h.settle()
	if got := h.counter("switchboard_intents_duplicate_total"); got != 1 {
		t.Fatalf("duplicates %v", got)
	}
	if n := h.sink.Count(echoTopic); n != 0 {
		t.Fatalf("a duplicate of a rejected intent was dispatched")
	}
	replay := func(id string) {
		v, err := h.codec.Encode(requests, &schemas.IntentRequest{IntentID: id, IntentType: "echo", Payload: "{}", Tenant: schemas.Ptr("acme")})
		if err != nil {
			t.Fatal(err)
		}
		off := h.offset[requests]
		h.offset[requests]++
		h.src.Push(&port.Record{
			Topic: requests, Offset: off, Key: []byte(id), Value: v, TimestampMs: h.clock.Now().UnixMilli(),
			Headers: []port.Header{{Key: port.HeaderReplayedFrom, Value: []byte("mcp.intent.dlq/0/0")}},
		})
	}
	replay("r-1")
	h.wait(echoTopic, 1)
	h.answerAs("r-1", "echo", schemas.Ptr("acme"), `{"ok":1}`)
	h.wait(results, 2)
	got := h.resultsFor("acme", "r-1")
	if len(got) != 2 || got[0].Outcome != schemas.OutcomeRejected || got[1].Outcome != schemas.OutcomeAnswered {
		t.Fatalf("results %+v, want rejected then answered", got)
	}
	replay("r-1") // answered now: a replay is a duplicate like any other
	h.settle()
	if n := h.sink.Count(echoTopic); n != 1 || len(h.resultsFor("acme", "r-1")) != 2 {
		t.Fatalf("a replay of an answered intent was served again")
	}
}

// Progress is paired like an answer: by (tenant, id), from the agent the
// intent was dispatched to. Two tenants' intents of one id each get their
// own progress; one naming no tenant is ambiguous, one from another agent
// or for another tenant is dead-lettered, and none of those is published.
func TestProgressIsPairedByTenant(t *testing.T) { both(t, testProgressIsPairedByTenant) }

func testProgressIsPairedByTenant(t *testing.T, delivery string) {
	h := start(t, progressConfig, delivery)
	h.request("p-1", "write", `{}`, tenantIs("acme"))
	h.request("p-1", "write", `{}`, tenantIs("globex"))
	h.wait(echoTopic, 2)
	msg := schemas.Ptr("m")
	send := func(agent string, tenant *string) {
		h.push(responses, "p-1", &schemas.AgentResponse{RequestID: "p-1", Agent: agent, Status: schemas.StatusProgress, Message: msg, Tenant: tenant})
	}
	send("echo", schemas.Ptr("globex"))
	send("echo", nil)                    // ambiguous: two tenants' p-1 with echo
	send("slow", schemas.Ptr("acme"))    // not acme's agent
	send("echo", schemas.Ptr("initech")) // no intent p-1 of initech's
	send("echo", schemas.Ptr("acme"))
	h.wait(progressT, 2)
	h.settle()
	got := h.published()
	if len(got) != 2 || intents.TenantOf(got[0].Tenant) != "globex" || intents.TenantOf(got[1].Tenant) != "acme" {
		t.Fatalf("published %d progress records: %+v", len(got), got)
	}
	for _, reason := range []string{"ambiguous", "agent", "tenant"} {
		if n := h.counter("switchboard_responses_invalid_total", "reason", reason); n != 1 {
			t.Fatalf("invalid responses (%s): %v, want 1", reason, n)
		}
	}
}
