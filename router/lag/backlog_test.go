package lag_test

import (
	"errors"
	"testing"

	"github.com/switchboard-mcp/switchboard/router/lag"
)

// The router's own group is sampled with the agents', in the same round
// trips, and exported as the cluster's backlog: it rises while the router
// stalls and falls once it catches up; a failed sample or a missing group
// exports nothing rather than zero.
func TestSamplerRouterBacklog(t *testing.T) {
	h := newHarnessWith(t, []lag.Option{lag.WithRouterGroup("g-router", "t-req")},
		lag.Group{Agent: "echo", GroupID: "g-echo", Topic: "t-echo"})
	now := h.clock.Now().UnixMilli()
	if own, ok := h.s.Router(); !ok || own.State != lag.StateUnknown {
		t.Fatalf("before the first sample: %+v %v, want state unknown", own, ok)
	}
	h.admin.set(func() {
		h.admin.groups["g-echo"] = lag.GroupInfo{State: lag.StateStable, Members: 1}
		h.admin.extents["t-echo"] = map[int32]lag.Extent{0: {Start: 0, End: 0}}
		h.admin.groups["g-router"] = lag.GroupInfo{State: lag.StateStable, Members: 2}
		h.admin.extents["t-req"] = map[int32]lag.Extent{0: {Start: 0, End: 100}, 1: {Start: 0, End: 50}}
		h.admin.committed["g-router"] = map[int32]int64{0: 90, 1: 50}
		h.admin.stamps["t-req"] = map[int32]int64{0: now - 4_000}
	})
	h.start()
	own, _ := h.s.Router()
	if own.State != lag.StateStable || !own.HasAge || own.OldestAge.Milliseconds() != 4_000 || own.Records != 10 || own.GroupID != "g-router" {
		t.Fatalf("Router() = %+v, want stable, 10 records, 4 s old", own)
	}
	if v, ok := h.gauge("switchboard_router_backlog_seconds", nil); !ok || v != 4 {
		t.Errorf("switchboard_router_backlog_seconds = %v (present %v), want 4", v, ok)
	}
	if v, ok := h.gauge("switchboard_router_backlog_records", nil); !ok || v != 10 {
		t.Errorf("switchboard_router_backlog_records = %v (present %v), want 10", v, ok)
	}
	h.admin.mu.Lock()
	describes := h.admin.calls["DescribeGroups"]
	h.admin.mu.Unlock()
	if describes != 1 {
		t.Errorf("DescribeGroups called %d times for one sample, want 1 (the router's group with the agents')", describes)
	}
	if a, _ := h.s.Agent("echo"); a.State != lag.StateStable {
		t.Errorf("the agent beside the router's group: %+v", a)
	}

	// The router stalls: the age grows with the clock.
	h.step()
	if own, _ = h.s.Router(); own.OldestAge.Milliseconds() != 4_000+interval.Milliseconds() {
		t.Errorf("after a stalled interval: age %s, want %d ms", own.OldestAge, 4_000+interval.Milliseconds())
	}

	// It catches up.
	h.admin.set(func() { h.admin.committed["g-router"] = map[int32]int64{0: 100, 1: 50} })
	h.step()
	if own, _ = h.s.Router(); !own.HasAge || own.OldestAge != 0 || own.Records != 0 {
		t.Errorf("caught up: %+v", own)
	}
	if v, ok := h.gauge("switchboard_router_backlog_seconds", nil); !ok || v != 0 {
		t.Errorf("caught up: switchboard_router_backlog_seconds = %v (present %v), want 0", v, ok)
	}

	// A failed sample: no age, no series.
	h.admin.set(func() { h.admin.fail = errors.New("broker down") })
	h.step()
	if own, _ = h.s.Router(); own.State != lag.StateError || own.HasAge {
		t.Errorf("failed sample: %+v", own)
	}
	if _, ok := h.gauge("switchboard_router_backlog_seconds", nil); ok {
		t.Error("switchboard_router_backlog_seconds exported after a failed sample")
	}

	// The group gone (its offsets expired): missing, not caught up.
	h.admin.set(func() {
		h.admin.fail = nil
		delete(h.admin.groups, "g-router")
	})
	h.step()
	if own, _ = h.s.Router(); own.State != lag.StateMissing || own.HasLag() {
		t.Errorf("missing group: %+v", own)
	}
	if _, ok := h.gauge("switchboard_router_backlog_records", nil); ok {
		t.Error("switchboard_router_backlog_records exported for a missing group")
	}
}

func TestSamplerWithoutRouterGroup(t *testing.T) {
	h := newHarness(t, lag.Group{Agent: "echo", GroupID: "g-echo", Topic: "t-echo"})
	if _, ok := h.s.Router(); ok {
		t.Error("Router() answers without WithRouterGroup")
	}
	if _, err := lag.NewSampler(newFakeAdmin(), nil, lag.WithRouterGroup("", "t")); !errors.Is(err, lag.ErrBadGroup) {
		t.Errorf("a router group without an id: %v, want ErrBadGroup", err)
	}
}
