package router_test

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/routertest"
	"github.com/switchboard-mcp/switchboard/schemas"
)

const contextConfig = `
agents:
  echo: {}
  slow: {}
intents:
  echo:        {agent: echo, timeout: 2s}
  fraud_check: {agent: slow, timeout: 300ms, context: attach, context_max_age: 10s, fallback: {static: {decision: review}}}
topics:
  partitions: 1
router:
  commit_interval: 2ms
`

func (h *harness) dispatched(topic string, n int) *schemas.AgentRequest {
	h.t.Helper()
	var ar schemas.AgentRequest
	if err := h.codec.Decode(h.wait(topic, n).Value, &ar); err != nil {
		h.t.Fatal(err)
	}
	return &ar
}

func withRef(ref string) func(*schemas.IntentRequest) {
	return func(r *schemas.IntentRequest) { r.ContextRef = schemas.Ptr(ref) }
}

func TestContextIsAttachedToTheAgentRequestAndTheTimeline(t *testing.T) {
	both(t, testContextIsAttached)
}

func testContextIsAttached(t *testing.T, delivery string) {
	store := routertest.NewContexts(clockwork.NewFakeClockAt(t0))
	h := start(t, contextConfig, delivery, router.WithContexts(store))

	fresh := &schemas.ContextSnapshot{EntityID: "user-1", Version: 7, SnapshotTs: t0.Add(-time.Second).UnixMilli(), Features: map[string]float64{"clicks_5m": 3}}
	stale := &schemas.ContextSnapshot{EntityID: "user-2", Version: 2, SnapshotTs: t0.Add(-11 * time.Second).UnixMilli(), Features: map[string]float64{"clicks_5m": 9}}
	store.Put(fresh)
	store.Put(stale)

	h.request("f-1", "fraud_check", `{}`, withRef("user-1"))
	ar := h.dispatched(slowTopic, 1)
	if ar.ContextStatus == nil || *ar.ContextStatus != schemas.ContextFresh || ar.Context == nil || ar.Context.Version != 7 || ar.Context.Features["clicks_5m"] != 3 {
		t.Fatalf("fresh: dispatched context %+v status %v", ar.Context, ar.ContextStatus)
	}
	h.answer("f-1", "slow", `{"decision":"allow"}`)
	res := h.result(1)
	if tl := res.Timeline; tl.ContextVersion == nil || *tl.ContextVersion != 7 || tl.ContextTs == nil || *tl.ContextTs != fresh.SnapshotTs {
		t.Fatalf("fresh: timeline %+v", tl)
	}

	h.request("f-2", "fraud_check", `{}`, withRef("user-2"))
	ar = h.dispatched(slowTopic, 2)
	if ar.ContextStatus == nil || *ar.ContextStatus != schemas.ContextStale || ar.Context == nil || ar.Context.Version != 2 {
		t.Fatalf("stale: dispatched context %+v status %v", ar.Context, ar.ContextStatus)
	}

	// A timed-out intent's result names the snapshot too.
	h.request("f-3", "fraud_check", `{}`, withRef("user-3"))
	ar = h.dispatched(slowTopic, 3)
	if ar.ContextStatus == nil || *ar.ContextStatus != schemas.ContextMissing || ar.Context != nil {
		t.Fatalf("missing: dispatched context %+v status %v", ar.Context, ar.ContextStatus)
	}
	h.advance(301 * time.Millisecond)
	for _, n := range []int{2, 3} {
		res := h.result(n)
		switch res.IntentID {
		case "f-2":
			if res.Timeline.ContextVersion == nil || *res.Timeline.ContextVersion != 2 || res.Outcome != schemas.OutcomeFallbackStatic {
				t.Fatalf("stale, timed out: %+v", res)
			}
		case "f-3":
			if res.Timeline.ContextVersion != nil || res.Timeline.ContextTs != nil {
				t.Fatalf("missing: timeline %+v", res.Timeline)
			}
		}
	}

	// No context_ref, or a type without context: attach: nothing looked up.
	h.request("f-4", "fraud_check", `{}`)
	if ar := h.dispatched(slowTopic, 4); ar.ContextStatus != nil || ar.Context != nil {
		t.Fatalf("no context_ref: %+v %v", ar.Context, ar.ContextStatus)
	}
	h.request("e-1", "echo", `{}`, withRef("user-1"))
	if ar := h.dispatched(echoTopic, 1); ar.ContextStatus != nil || ar.Context != nil {
		t.Fatalf("echo does not attach: %+v %v", ar.Context, ar.ContextStatus)
	}
	if got := store.Lookups(); len(got) != 3 {
		t.Fatalf("lookups %v, want user-1, user-2, user-3", got)
	}
}

// Without a ContextLookup, an attaching type says missing.
func TestContextWithoutAStoreIsMissing(t *testing.T) {
	h := start(t, contextConfig, "at_least_once")
	h.request("f-1", "fraud_check", `{}`, withRef("user-1"))
	if ar := h.dispatched(slowTopic, 1); ar.ContextStatus == nil || *ar.ContextStatus != schemas.ContextMissing || ar.Context != nil {
		t.Fatalf("dispatched %+v %v", ar.Context, ar.ContextStatus)
	}
}

// A restored intent's result still names the snapshot attached at dispatch.
func TestRestoredIntentKeepsItsContextInTheTimeline(t *testing.T) {
	both(t, func(t *testing.T, delivery string) {
		store := routertest.NewContexts(clockwork.NewFakeClockAt(t0))
		a := start(t, contextConfig, delivery, router.WithContexts(store))
		store.Put(&schemas.ContextSnapshot{EntityID: "user-1", Version: 11, SnapshotTs: t0.UnixMilli(), Features: map[string]float64{"x": 1}})
		a.request("f-1", "fraud_check", `{}`, withRef("user-1"))
		a.handOver()
		a.wait(pendingT, 1)

		b := start(t, contextConfig, delivery, router.WithRestorer(a.changelog()))
		b.settle()
		b.answer("f-1", "slow", `{"decision":"allow"}`)
		res := b.result(1)
		if res.IntentID != "f-1" || res.Timeline.ContextVersion == nil || *res.Timeline.ContextVersion != 11 || *res.Timeline.ContextTs != t0.UnixMilli() {
			t.Fatalf("restored result %+v timeline %+v", res, res.Timeline)
		}
	})
}

// An intent gets the snapshot of its context_ref in its own tenant's
// namespace only: globex's intent naming acme's entity gets it missing, and
// the intent without a tenant sees only the entity without one.
func TestContextIsAttachedFromTheIntentsTenantOnly(t *testing.T) {
	store := routertest.NewContexts(clockwork.NewFakeClockAt(t0))
	h := start(t, contextConfig, "at_least_once", router.WithContexts(store))
	store.Put(&schemas.ContextSnapshot{EntityID: "user-1", Tenant: schemas.Ptr("acme"), Version: 7, SnapshotTs: t0.UnixMilli(), Features: map[string]float64{"secret": 1}})
	store.Put(&schemas.ContextSnapshot{EntityID: "user-1", Version: 3, SnapshotTs: t0.UnixMilli(), Features: map[string]float64{"public": 1}})

	h.request("f-1", "fraud_check", `{}`, withRef("user-1"), tenantIs("globex"))
	if ar := h.dispatched(slowTopic, 1); ar.Context != nil || ar.ContextStatus == nil || *ar.ContextStatus != schemas.ContextMissing {
		t.Fatalf("globex's intent got %+v (%v)", ar.Context, ar.ContextStatus)
	}
	h.request("f-2", "fraud_check", `{}`, withRef("user-1"), tenantIs("acme"))
	if ar := h.dispatched(slowTopic, 2); ar.Context == nil || ar.Context.Features["secret"] != 1 || *ar.ContextStatus != schemas.ContextFresh {
		t.Fatalf("acme's intent got %+v (%v)", ar.Context, ar.ContextStatus)
	}
	h.request("f-3", "fraud_check", `{}`, withRef("user-1"))
	if ar := h.dispatched(slowTopic, 3); ar.Context == nil || ar.Context.Version != 3 {
		t.Fatalf("the tenant-less intent got %+v", ar.Context)
	}
}
