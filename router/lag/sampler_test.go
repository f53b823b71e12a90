package lag_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/switchboard-mcp/switchboard/router/lag"
)

// fakeAdmin is a cluster the test changes between samples.
type fakeAdmin struct {
	mu        sync.Mutex
	groups    map[string]lag.GroupInfo
	extents   map[string]map[int32]lag.Extent
	committed map[string]map[int32]int64 // by group
	stamps    map[string]map[int32]int64 // by topic: the timestamp at each partition's committed offset
	probed    map[string]map[int32]int64 // by topic: what FirstTimestamps was last asked
	fail      error                      // DescribeGroups fails with it
	stampErr  error                      // FirstTimestamps fails with it
	unread    map[int32]bool             // partitions FirstTimestamps leaves out
	calls     map[string]int             // by method
}

func newFakeAdmin() *fakeAdmin {
	return &fakeAdmin{
		groups: map[string]lag.GroupInfo{}, extents: map[string]map[int32]lag.Extent{},
		committed: map[string]map[int32]int64{}, stamps: map[string]map[int32]int64{},
		probed: map[string]map[int32]int64{}, unread: map[int32]bool{}, calls: map[string]int{},
	}
}

func (f *fakeAdmin) DescribeGroups(_ context.Context, ids []string) (map[string]lag.GroupInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["DescribeGroups"]++
	if f.fail != nil {
		return nil, f.fail
	}
	out := map[string]lag.GroupInfo{}
	for _, id := range ids {
		g, ok := f.groups[id]
		if !ok {
			g = lag.GroupInfo{State: lag.StateMissing}
		}
		out[id] = g
	}
	return out, nil
}

func (f *fakeAdmin) Extents(_ context.Context, topics []string) (map[string]map[int32]lag.Extent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]map[int32]lag.Extent{}
	for _, t := range topics {
		if e, ok := f.extents[t]; ok {
			out[t] = e
		}
	}
	return out, nil
}

func (f *fakeAdmin) Committed(_ context.Context, group, _ string, _ []int32) (map[int32]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[int32]int64{}
	for p, o := range f.committed[group] {
		out[p] = o
	}
	return out, nil
}

func (f *fakeAdmin) FirstTimestamps(_ context.Context, topic string, from map[int32]int64) (map[int32]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["FirstTimestamps"]++
	f.probed[topic] = from
	if f.stampErr != nil {
		return nil, f.stampErr
	}
	out := map[int32]int64{}
	for p := range from {
		if !f.unread[p] {
			out[p] = f.stamps[topic][p]
		}
	}
	return out, nil
}

// set changes the fake cluster under its lock.
func (f *fakeAdmin) set(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

// harness runs a Sampler on a fake clock; step advances to the next sample
// and waits until it is published (the Sampler waits on its next timer).
type harness struct {
	t     *testing.T
	clock *clockwork.FakeClock
	admin *fakeAdmin
	reg   *prometheus.Registry
	s     *lag.Sampler
	ctx   context.Context
}

const interval = 10 * time.Second

func newHarness(t *testing.T, groups ...lag.Group) *harness {
	t.Helper()
	return newHarnessWith(t, nil, groups...)
}

func newHarnessWith(t *testing.T, opts []lag.Option, groups ...lag.Group) *harness {
	t.Helper()
	h := &harness{t: t, clock: clockwork.NewFakeClockAt(time.UnixMilli(1_800_000_000_000)), admin: newFakeAdmin(), reg: prometheus.NewRegistry()}
	var err error
	opts = append([]lag.Option{lag.WithClock(h.clock), lag.WithInterval(interval), lag.WithRegisterer(h.reg)}, opts...)
	h.s, err = lag.NewSampler(h.admin, groups, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	h.ctx = ctx
	t.Cleanup(cancel)
	return h
}

// start runs the Sampler and waits for its first sample.
func (h *harness) start() {
	h.t.Helper()
	done := make(chan error, 1)
	go func() { done <- h.s.Run(context.Background()) }()
	h.t.Cleanup(func() {
		if err := h.s.Shutdown(context.Background()); err != nil {
			h.t.Error(err)
		}
		if err := <-done; err != nil {
			h.t.Errorf("Run: %v", err)
		}
	})
	h.settle()
}

func (h *harness) settle() {
	h.t.Helper()
	if err := h.clock.BlockUntilContext(h.ctx, 1); err != nil {
		h.t.Fatalf("the sampler did not finish a sample: %v", err)
	}
}

func (h *harness) step() {
	h.t.Helper()
	h.clock.Advance(interval)
	h.settle()
}

// gauge returns the value of the series name{labels}, and whether it exists.
func (h *harness) gauge(name string, labels map[string]string) (float64, bool) {
	h.t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			return value(m), true
		}
	}
	return 0, false
}

func value(m *dto.Metric) float64 {
	if m.GetGauge() != nil {
		return m.GetGauge().GetValue()
	}
	return m.GetCounter().GetValue()
}

func (h *harness) wantLag(agent string, records, ageSeconds float64) {
	h.t.Helper()
	a := map[string]string{"agent": agent}
	if v, ok := h.gauge("switchboard_agent_lag_records", a); !ok || v != records {
		h.t.Errorf("%s: switchboard_agent_lag_records = %v (present %v), want %v", agent, v, ok, records)
	}
	if v, ok := h.gauge("switchboard_agent_lag_seconds", a); !ok || v != ageSeconds {
		h.t.Errorf("%s: switchboard_agent_lag_seconds = %v (present %v), want %v", agent, v, ok, ageSeconds)
	}
}

func (h *harness) wantState(agent string, want lag.State) {
	h.t.Helper()
	for _, st := range lag.States {
		v, ok := h.gauge("switchboard_agent_group_state", map[string]string{"agent": agent, "state": string(st)})
		if w := map[bool]float64{true: 1, false: 0}[st == want]; !ok || v != w {
			h.t.Errorf("%s: switchboard_agent_group_state{state=%q} = %v (present %v), want %v", agent, st, v, ok, w)
		}
	}
	if a, _ := h.s.Agent(agent); a.State != want {
		h.t.Errorf("%s: Agent().State = %s, want %s", agent, a.State, want)
	}
}

func TestSamplerLagRisesAndFalls(t *testing.T) {
	h := newHarness(t, lag.Group{Agent: "echo", GroupID: "g-echo", Topic: "t-echo"})
	now := h.clock.Now().UnixMilli()
	h.admin.set(func() {
		h.admin.groups["g-echo"] = lag.GroupInfo{State: lag.StateStable, Members: 2}
		h.admin.extents["t-echo"] = map[int32]lag.Extent{0: {Start: 0, End: 10}, 1: {Start: 3, End: 5}}
		h.admin.committed["g-echo"] = map[int32]int64{0: 4} // partition 1: no committed offset, counts from its start
		h.admin.stamps["t-echo"] = map[int32]int64{0: now - 30_000, 1: now - 10_000}
	})
	if a, ok := h.s.Agent("echo"); !ok || a.State != lag.StateUnknown {
		t.Fatalf("before the first sample: %+v %v, want state unknown", a, ok)
	}
	if _, ok := h.gauge("switchboard_agent_lag_records", map[string]string{"agent": "echo"}); ok {
		t.Fatal("a lag series exists before the first sample")
	}
	h.start()
	h.wantState("echo", lag.StateStable)
	h.wantLag("echo", 6+2, 30)
	if v, _ := h.gauge("switchboard_agent_group_members", map[string]string{"agent": "echo"}); v != 2 {
		t.Errorf("members = %v, want 2", v)
	}
	h.admin.mu.Lock()
	probed := h.admin.probed["t-echo"]
	h.admin.mu.Unlock()
	if len(probed) != 2 || probed[0] != 4 || probed[1] != 3 {
		t.Errorf("FirstTimestamps was asked %v, want the committed offset of partition 0 (4) and the start of partition 1 (3)", probed)
	}

	// The agent stalls: requests keep coming, its offsets stay; the age grows with the clock.
	h.admin.set(func() {
		h.admin.extents["t-echo"] = map[int32]lag.Extent{0: {Start: 0, End: 5010}, 1: {Start: 3, End: 2005}}
	})
	h.step()
	h.wantLag("echo", 5006+2002, 40)

	// It resumes and catches up: no lag, no age, and nothing to read.
	h.admin.set(func() {
		h.admin.committed["g-echo"] = map[int32]int64{0: 5010, 1: 2005}
		h.admin.calls["FirstTimestamps"] = 0
	})
	h.step()
	h.wantLag("echo", 0, 0)
	if n := h.admin.calls["FirstTimestamps"]; n != 0 {
		t.Errorf("FirstTimestamps called %d times with no lag", n)
	}
	a, _ := h.s.Agent("echo")
	if a.Records != 0 || len(a.Partitions) != 2 || a.Partitions[1].Committed != 2005 || a.Partitions[1].End != 2005 {
		t.Errorf("Agent() = %+v", a)
	}
}

func TestSamplerGroupMissingIsNotZero(t *testing.T) {
	h := newHarness(t,
		lag.Group{Agent: "echo", GroupID: "g-echo", Topic: "t-echo"},
		lag.Group{Agent: "ghost", GroupID: "g-ghost", Topic: "t-ghost"})
	h.admin.set(func() {
		h.admin.groups["g-echo"] = lag.GroupInfo{State: lag.StateStable, Members: 1}
		h.admin.extents["t-echo"] = map[int32]lag.Extent{0: {Start: 0, End: 1}}
		h.admin.committed["g-echo"] = map[int32]int64{0: 1}
		h.admin.extents["t-ghost"] = map[int32]lag.Extent{0: {Start: 0, End: 50}}
	})
	h.start()
	h.wantState("echo", lag.StateStable)
	h.wantLag("echo", 0, 0)
	h.wantState("ghost", lag.StateMissing)
	for _, name := range []string{"switchboard_agent_lag_records", "switchboard_agent_lag_seconds", "switchboard_agent_group_members"} {
		if v, ok := h.gauge(name, map[string]string{"agent": "ghost"}); ok {
			t.Errorf("%s{agent=ghost} = %v: a missing group must have no lag series", name, v)
		}
	}
	a, _ := h.s.Agent("ghost")
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var view map[string]any
	_ = json.Unmarshal(b, &view)
	if view["state"] != "missing" || view["group_id"] != "g-ghost" {
		t.Errorf("JSON %s: want state missing and the group id", b)
	}
	for _, k := range []string{"records", "oldest_age_ms", "members"} {
		if _, ok := view[k]; ok {
			t.Errorf("JSON %s has %q: a missing group's lag is not zero, it is unknown", b, k)
		}
	}

	// The agent starts: its group appears with everything still to read.
	now := h.clock.Now().UnixMilli()
	h.admin.set(func() {
		h.admin.groups["g-ghost"] = lag.GroupInfo{State: lag.StateEmpty}
		h.admin.stamps["t-ghost"] = map[int32]int64{0: now - 5_000}
	})
	h.step()
	h.wantState("ghost", lag.StateEmpty)
	h.wantLag("ghost", 50, 15)
	a, _ = h.s.Agent("ghost")
	b, _ = json.Marshal(a)
	view = nil
	_ = json.Unmarshal(b, &view)
	if view["records"] != 50.0 || view["oldest_age_ms"] != 15000.0 || view["members"] != 0.0 {
		t.Errorf("JSON %s: want records 50, oldest_age_ms 15000, members 0", b)
	}
}

func TestSamplerErrorsAndMarkers(t *testing.T) {
	h := newHarness(t, lag.Group{Agent: "echo", GroupID: "g-echo", Topic: "t-echo"})
	now := h.clock.Now().UnixMilli()
	h.admin.set(func() {
		h.admin.fail = errors.New("broker down")
		h.admin.groups["g-echo"] = lag.GroupInfo{State: lag.StateStable, Members: 1}
		h.admin.extents["t-echo"] = map[int32]lag.Extent{0: {Start: 0, End: 10}, 1: {Start: 0, End: 10}}
		h.admin.committed["g-echo"] = map[int32]int64{0: 9, 1: 7}
		h.admin.stamps["t-echo"] = map[int32]int64{0: lag.NoRecord, 1: now - 2_000}
	})
	h.start()
	h.wantState("echo", lag.StateError)
	if a, _ := h.s.Agent("echo"); a.Err != "broker down" {
		t.Errorf("Err = %q", a.Err)
	}
	if _, ok := h.gauge("switchboard_agent_lag_records", map[string]string{"agent": "echo"}); ok {
		t.Error("a failed sample left a lag series")
	}

	// Back: partition 0 has only a transaction marker left, so it does not lag.
	h.admin.set(func() { h.admin.fail = nil })
	h.step()
	h.wantState("echo", lag.StateStable)
	h.wantLag("echo", 3, 12)

	// The oldest request cannot be read: the count stays, the age is unknown.
	h.admin.set(func() { h.admin.stampErr = errors.New("fetch timed out") })
	h.step()
	if v, ok := h.gauge("switchboard_agent_lag_records", map[string]string{"agent": "echo"}); !ok || v != 4 {
		t.Errorf("lag_records = %v (present %v), want 4 (1 + 3, the marker uncounted without a read)", v, ok)
	}
	if v, ok := h.gauge("switchboard_agent_lag_seconds", map[string]string{"agent": "echo"}); ok {
		t.Errorf("lag_seconds = %v with no request read, want absent", v)
	}
	// One partition unread: the age is the oldest read, a lower bound.
	h.admin.set(func() { h.admin.stampErr, h.admin.unread[0] = nil, true })
	h.step()
	h.wantLag("echo", 4, 32)
}

func TestNewSamplerRefusesBadGroups(t *testing.T) {
	admin := newFakeAdmin()
	for _, groups := range [][]lag.Group{
		{{Agent: "a", GroupID: "", Topic: "t"}},
		{{Agent: "a", GroupID: "g", Topic: "t"}, {Agent: "a", GroupID: "g2", Topic: "t2"}},
	} {
		if _, err := lag.NewSampler(admin, groups); !errors.Is(err, lag.ErrBadGroup) {
			t.Errorf("%v: err = %v, want ErrBadGroup", groups, err)
		}
	}
	if _, err := lag.NewSampler(nil, nil); !errors.Is(err, lag.ErrMissingDependency) {
		t.Errorf("nil admin: err = %v", err)
	}
	if _, err := lag.NewSampler(admin, nil, lag.WithInterval(0)); !errors.Is(err, lag.ErrBadInterval) {
		t.Errorf("zero interval: err = %v", err)
	}
}
