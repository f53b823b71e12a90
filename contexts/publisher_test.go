package contexts_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/contexts"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// sentSnapshots records what a Publisher produces.
type sentSnapshots struct {
	mu   sync.Mutex
	sent []*schemas.ContextSnapshot
	fail error
}

func (s *sentSnapshots) SendSnapshot(_ context.Context, snap *schemas.ContextSnapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.sent = append(s.sent, snap)
	return nil
}

func (s *sentSnapshots) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent)
}

func newPublisher(t *testing.T, cfg contexts.PublisherConfig, opts ...contexts.PublisherOption) (*contexts.Publisher, *sentSnapshots, *clockwork.FakeClock, *prometheus.Registry) {
	t.Helper()
	clock := clockwork.NewFakeClockAt(t0)
	reg := prometheus.NewRegistry()
	sent := &sentSnapshots{}
	p, err := contexts.NewPublisher(cfg, sent, append([]contexts.PublisherOption{
		contexts.WithPublisherClock(clock), contexts.WithPublisherRegisterer(reg),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return p, sent, clock, reg
}

func TestPublisherThresholds(t *testing.T) {
	p, sent, clock, reg := newPublisher(t, contexts.PublisherConfig{
		Heartbeat: time.Minute,
		Thresholds: map[string]contexts.Threshold{
			"clicks": {Absolute: 2},
			"spend":  {Relative: 0.1},
			"both":   {Absolute: 5, Relative: 0.5},
		},
	})
	ctx := context.Background()
	steps := []struct {
		features map[string]float64
		reason   string
	}{
		{map[string]float64{"clicks": 10, "spend": 100, "both": 100, "any": 1}, contexts.ReasonFirst},
		{map[string]float64{"clicks": 12, "spend": 100, "both": 100, "any": 1}, contexts.ReasonSuppressed}, // |12-10| = 2 is not beyond 2
		{map[string]float64{"clicks": 13, "spend": 100, "both": 100, "any": 1}, contexts.ReasonChanged},    // 3 > 2
		{map[string]float64{"clicks": 13, "spend": 110, "both": 100, "any": 1}, contexts.ReasonSuppressed}, // 10% of 100 is not beyond 10%
		{map[string]float64{"clicks": 13, "spend": 111, "both": 100, "any": 1}, contexts.ReasonChanged},    // drift adds up against the last published
		{map[string]float64{"clicks": 13, "spend": 111, "both": 106, "any": 1}, contexts.ReasonChanged},    // absolute 6 > 5, though relative 6% < 50%
		{map[string]float64{"clicks": 13, "spend": 111, "both": 106, "any": 1.0001}, contexts.ReasonChanged},
		{map[string]float64{"clicks": 13, "spend": 111, "both": 106}, contexts.ReasonChanged}, // a feature removed
		{map[string]float64{"clicks": 13, "spend": 111, "both": 106, "new": 0}, contexts.ReasonChanged},
	}
	for i, s := range steps {
		clock.Advance(time.Second)
		d, err := p.Publish(ctx, "", "user-1", s.features)
		if err != nil {
			t.Fatal(err)
		}
		if d.Reason != s.reason || d.Published != (s.reason != contexts.ReasonSuppressed) {
			t.Fatalf("step %d %v: %+v, want %s", i, s.features, d, s.reason)
		}
	}
	if sent.count() != 7 {
		t.Fatalf("%d snapshots produced, want 7", sent.count())
	}
	last := sent.sent[len(sent.sent)-1]
	if !reflect.DeepEqual(last.Features, map[string]float64{"clicks": 13, "spend": 111, "both": 106, "new": 0}) || last.EntityID != "user-1" || last.SnapshotTs != clock.Now().UnixMilli() {
		t.Fatalf("last snapshot %+v", last)
	}
	for i := 1; i < len(sent.sent); i++ {
		if sent.sent[i].Version <= sent.sent[i-1].Version {
			t.Fatalf("versions do not increase: %d then %d", sent.sent[i-1].Version, sent.sent[i].Version)
		}
	}
	if got := gauge(t, reg, "switchboard_context_publish_suppression_ratio"); got != 2.0/9 {
		t.Fatalf("suppression ratio %v, want 2/9", got)
	}
}

func TestPublisherHeartbeat(t *testing.T) {
	p, sent, clock, _ := newPublisher(t, contexts.PublisherConfig{Heartbeat: 10 * time.Second})
	ctx := context.Background()
	f := map[string]float64{"x": 1}
	if d, _ := p.Publish(ctx, "", "e", f); !d.Published {
		t.Fatal("first update not published")
	}
	clock.Advance(9999 * time.Millisecond)
	if d, _ := p.Publish(ctx, "", "e", f); d.Published {
		t.Fatalf("unchanged before the heartbeat: %+v", d)
	}
	clock.Advance(time.Millisecond)
	d, _ := p.Publish(ctx, "", "e", f)
	if !d.Published || d.Reason != contexts.ReasonHeartbeat {
		t.Fatalf("unchanged at the heartbeat: %+v", d)
	}
	// The heartbeat counts from the last snapshot, not the last update.
	clock.Advance(5 * time.Second)
	if d, _ := p.Publish(ctx, "", "e", f); d.Published {
		t.Fatalf("5s after a heartbeat: %+v", d)
	}
	clock.Advance(5 * time.Second)
	if d, _ := p.Publish(ctx, "", "e", f); !d.Published {
		t.Fatalf("10s after a heartbeat: %+v", d)
	}
	// Entities are independent.
	if d, _ := p.Publish(ctx, "", "other", f); d.Reason != contexts.ReasonFirst {
		t.Fatalf("another entity: %+v", d)
	}
	if sent.count() != 4 {
		t.Fatalf("%d snapshots, want 4", sent.count())
	}
}

func TestPublisherVersionsWithinAMillisecond(t *testing.T) {
	p, sent, _, _ := newPublisher(t, contexts.PublisherConfig{})
	for i := range 3 {
		if _, err := p.Publish(context.Background(), "", "e", map[string]float64{"x": float64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	v := []int64{sent.sent[0].Version, sent.sent[1].Version, sent.sent[2].Version}
	if v[0] != t0.UnixMilli() || v[1] != v[0]+1 || v[2] != v[0]+2 {
		t.Fatalf("versions %v: want the time in ms, then +1 within one millisecond", v)
	}
}

// A publisher seeded with what the topic holds (a restart) continues its
// versions even when its clock reads earlier, and suppresses as before.
func TestPublisherSeededAfterARestart(t *testing.T) {
	held := &schemas.ContextSnapshot{EntityID: "e", Version: t0.Add(time.Hour).UnixMilli(), SnapshotTs: t0.UnixMilli(), Features: map[string]float64{"x": 10}}
	p, sent, clock, _ := newPublisher(t, contexts.PublisherConfig{Heartbeat: time.Minute, Thresholds: map[string]contexts.Threshold{"x": {Absolute: 1}}},
		contexts.WithSeed(func(_, entity string) *schemas.ContextSnapshot {
			if entity == "e" {
				return held
			}
			return nil
		}))
	if d, _ := p.Publish(context.Background(), "", "e", map[string]float64{"x": 10.5}); d.Published || d.Snapshot != held {
		t.Fatalf("within the threshold of the seed: %+v", d)
	}
	clock.Advance(time.Second)
	d, _ := p.Publish(context.Background(), "", "e", map[string]float64{"x": 12})
	if !d.Published || d.Snapshot.Version != held.Version+1 {
		t.Fatalf("beyond the threshold: %+v (version must follow the seed's %d)", d, held.Version)
	}
	if sent.count() != 1 {
		t.Fatalf("%d snapshots", sent.count())
	}
}

func TestPublisherErrors(t *testing.T) {
	p, sent, _, _ := newPublisher(t, contexts.PublisherConfig{})
	ctx := context.Background()
	if _, err := p.Publish(ctx, "", "", nil); !errors.Is(err, contexts.ErrInvalidEntity) {
		t.Fatalf("empty entity: %v", err)
	}
	if _, err := p.Publish(ctx, "", "e", map[string]float64{"x": nan()}); !errors.Is(err, contexts.ErrInvalidEntity) {
		t.Fatalf("NaN: %v", err)
	}
	boom := errors.New("broker down")
	sent.fail = boom
	if _, err := p.Publish(ctx, "", "e", map[string]float64{"x": 1}); !errors.Is(err, boom) {
		t.Fatalf("send failure: %v", err)
	}
	sent.fail = nil
	// A failed send is not remembered: the same update is published next.
	if d, err := p.Publish(ctx, "", "e", map[string]float64{"x": 1}); err != nil || d.Reason != contexts.ReasonFirst {
		t.Fatalf("after a failed send: %+v %v", d, err)
	}
	if _, err := contexts.NewPublisher(contexts.PublisherConfig{Thresholds: map[string]contexts.Threshold{"x": {Absolute: -1}}}, sent); err == nil {
		t.Fatal("negative threshold accepted")
	}
	if _, err := contexts.NewPublisher(contexts.PublisherConfig{}, nil); !errors.Is(err, contexts.ErrMissingDependency) {
		t.Fatalf("nil sender: %v", err)
	}
}

func nan() float64 {
	var zero float64
	return zero / zero
}

// gauge returns the value of the gauge name.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// A forgotten entity is compared with its seed again, or published as new.
func TestPublisherForget(t *testing.T) {
	p, sent, _, _ := newPublisher(t, contexts.PublisherConfig{})
	ctx := context.Background()
	for _, want := range []string{contexts.ReasonFirst, contexts.ReasonSuppressed} {
		if d, err := p.Publish(ctx, "", "e1", map[string]float64{"a": 1}); err != nil || d.Reason != want {
			t.Fatalf("publish: %+v %v, want %s", d, err, want)
		}
	}
	p.Forget("", "e1")
	if p.Len() != 0 {
		t.Fatalf("remembers %d entities after Forget", p.Len())
	}
	if d, err := p.Publish(ctx, "", "e1", map[string]float64{"a": 1}); err != nil || d.Reason != contexts.ReasonFirst || sent.count() != 2 {
		t.Fatalf("after Forget: %+v %v", d, err)
	}
}

// The publisher keeps tenants' entities apart: each is compared with its
// own last snapshot and seeded from its own, and its snapshots name its
// tenant. Ids an intent could not name are refused.
func TestPublisherKeepsTenantsApart(t *testing.T) {
	var seeded []string
	p, sent, _, _ := newPublisher(t, contexts.PublisherConfig{}, contexts.WithSeed(func(tenant, entity string) *schemas.ContextSnapshot {
		seeded = append(seeded, tenant+"|"+entity)
		return nil
	}))
	ctx := context.Background()
	f := map[string]float64{"x": 1}
	for _, tenant := range []string{"", "acme", "globex"} {
		d, err := p.Publish(ctx, tenant, "e", f)
		if err != nil || d.Reason != contexts.ReasonFirst {
			t.Fatalf("%q: %+v %v", tenant, d, err)
		}
		if got := d.Snapshot.Tenant; (tenant == "" && got != nil) || (tenant != "" && (got == nil || *got != tenant)) {
			t.Fatalf("%q: the snapshot names tenant %v", tenant, got)
		}
	}
	if d, _ := p.Publish(ctx, "acme", "e", f); d.Published {
		t.Fatal("acme's unchanged entity was published again")
	}
	p.Forget("acme", "e")
	if d, _ := p.Publish(ctx, "globex", "e", f); d.Published {
		t.Fatal("forgetting acme's entity forgot globex's")
	}
	if !reflect.DeepEqual(seeded, []string{"|e", "acme|e", "globex|e"}) {
		t.Fatalf("seeded %v", seeded)
	}
	if sent.count() != 3 {
		t.Fatalf("%d snapshots sent", sent.count())
	}
	for _, bad := range [][2]string{{"", "user 1"}, {"a b", "e"}, {"", ""}, {"", "a\x1fb"}} {
		if _, err := p.Publish(ctx, bad[0], bad[1], f); !errors.Is(err, contexts.ErrInvalidEntity) {
			t.Errorf("tenant %q entity %q: %v", bad[0], bad[1], err)
		}
	}
}
