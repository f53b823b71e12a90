package contexts_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-mcp/switchboard/contexts"
	"github.com/switchboard-mcp/switchboard/schemas"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// record is one record of a fake snapshot topic.
type record struct {
	key   string
	value []byte // nil: tombstone
}

// fakeTopic is a contexts.Reader over records handed to it: the backlog is
// what the topic holds at start (caughtUp follows it), live what comes after.
type fakeTopic struct {
	backlog []record
	live    chan record
	applied chan struct{} // one value per live record applied
}

func newFakeTopic(backlog ...record) *fakeTopic {
	return &fakeTopic{backlog: backlog, live: make(chan record), applied: make(chan struct{}, 1024)}
}

func (f *fakeTopic) ReadSnapshots(ctx context.Context, apply func(key, value []byte), caughtUp func()) error {
	for _, r := range f.backlog {
		apply([]byte(r.key), r.value)
	}
	caughtUp()
	for {
		select {
		case <-ctx.Done():
			return nil
		case r := <-f.live:
			apply([]byte(r.key), r.value)
			f.applied <- struct{}{}
		}
	}
}

func encode(t testing.TB, c *schemas.Codec, s *schemas.ContextSnapshot) []byte {
	t.Helper()
	b, err := c.Encode("mcp.context.snapshot", s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func snap(entity string, version int64, ts time.Time, features map[string]float64) *schemas.ContextSnapshot {
	return &schemas.ContextSnapshot{EntityID: entity, Version: version, SnapshotTs: ts.UnixMilli(), Features: features}
}

// runStore starts a store over topic and waits until it caught up.
func runStore(t *testing.T, topic contexts.Reader, opts ...contexts.StoreOption) *contexts.Store {
	t.Helper()
	return runStoreB(t, topic, opts...)
}

// runStoreB is runStore for tests and benchmarks.
func runStoreB(t testing.TB, topic contexts.Reader, opts ...contexts.StoreOption) *contexts.Store {
	t.Helper()
	codec, _ := schemas.NewCodec()
	opts = append([]contexts.StoreOption{contexts.WithLogger(slog.New(slog.DiscardHandler))}, opts...)
	s, err := contexts.NewStore(topic, codec, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(); !errors.Is(err, contexts.ErrNotCaughtUp) {
		t.Fatalf("Ready before Run = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if err := s.Ready(); !errors.Is(err, contexts.ErrStopped) {
			t.Errorf("Ready after Run = %v", err)
		}
	})
	select {
	case <-s.CaughtUp():
	case <-time.After(10 * time.Second):
		t.Fatal("the store never caught up")
	}
	return s
}

func TestStoreKeepsTheNewestSnapshotPerEntity(t *testing.T) {
	codec, _ := schemas.NewCodec()
	clock := clockwork.NewFakeClockAt(t0)
	reg := prometheus.NewRegistry()
	topic := newFakeTopic(
		record{"user-1", encode(t, codec, snap("user-1", 1, t0, map[string]float64{"clicks": 1}))},
		record{"user-2", encode(t, codec, snap("user-2", 1, t0, map[string]float64{"clicks": 5}))},
		record{"user-1", encode(t, codec, snap("user-1", 3, t0, map[string]float64{"clicks": 3}))},
		record{"user-1", encode(t, codec, snap("user-1", 2, t0, map[string]float64{"clicks": 2}))}, // outdated
		record{"user-2", nil},                                          // tombstone
		record{"user-3", []byte("not a snapshot")},                     // invalid
		record{"user-4", encode(t, codec, snap("user-5", 1, t0, nil))}, // key is not its entity
	)
	s := runStore(t, topic, contexts.WithClock(clock), contexts.WithRegisterer(reg))
	if err := s.Ready(); err != nil {
		t.Fatalf("Ready after catching up = %v", err)
	}
	got, status := s.Lookup("", "user-1", 0)
	if status != schemas.ContextFresh || got == nil || got.Version != 3 || got.Features["clicks"] != 3 {
		t.Fatalf("user-1: %+v %s", got, status)
	}
	for _, e := range []string{"user-2", "user-3", "user-4", "user-5"} {
		if got, status := s.Lookup("", e, 0); got != nil || status != schemas.ContextMissing {
			t.Errorf("%s: %+v %s, want missing", e, got, status)
		}
	}
	if s.Len() != 1 {
		t.Errorf("Len = %d", s.Len())
	}
	for result, want := range map[string]float64{"applied": 3, "outdated": 1, "tombstone": 1, "invalid": 2} {
		if got := counter(t, reg, "switchboard_context_snapshots_read_total", result); got != want {
			t.Errorf("read{%s} = %v, want %v", result, got, want)
		}
	}

	// It follows the topic: a newer version replaces, a tombstone deletes.
	topic.live <- record{"user-1", encode(t, codec, snap("user-1", 4, t0, map[string]float64{"clicks": 4}))}
	<-topic.applied
	if got, _ := s.Lookup("", "user-1", 0); got.Version != 4 {
		t.Fatalf("after a newer version: %+v", got)
	}
	topic.live <- record{"user-1", nil}
	<-topic.applied
	if got, status := s.Lookup("", "user-1", 0); got != nil || status != schemas.ContextMissing {
		t.Fatalf("after a tombstone: %+v %s", got, status)
	}
}

func TestStoreJudgesFreshnessByAge(t *testing.T) {
	codec, _ := schemas.NewCodec()
	clock := clockwork.NewFakeClockAt(t0)
	reg := prometheus.NewRegistry()
	topic := newFakeTopic(record{"user-1", encode(t, codec, snap("user-1", 1, t0, map[string]float64{"x": 1}))})
	s := runStore(t, topic, contexts.WithClock(clock), contexts.WithRegisterer(reg))

	clock.Advance(30 * time.Second)
	if _, status := s.Lookup("", "user-1", 0); status != schemas.ContextFresh {
		t.Fatalf("at the default max age: %s, want fresh", status)
	}
	if e, ok := s.Get("", "user-1"); !ok || e.Age != 30*time.Second || e.Status != schemas.ContextFresh {
		t.Fatalf("Get = %+v %v", e, ok)
	}
	clock.Advance(time.Millisecond)
	if _, status := s.Lookup("", "user-1", 0); status != schemas.ContextStale {
		t.Fatalf("past the default max age: %s, want stale", status)
	}
	if snap, status := s.Lookup("", "user-1", time.Minute); status != schemas.ContextFresh || snap == nil {
		t.Fatalf("within a longer max age: %s", status)
	}
	if snap, status := s.Lookup("", "user-1", time.Second); status != schemas.ContextStale || snap == nil {
		t.Fatalf("past a shorter max age: %s (a stale snapshot is still returned)", status)
	}
	if n := testutil.CollectAndCount(reg, "switchboard_context_attach_age_seconds"); n != 1 {
		t.Fatalf("attach age histogram: %d series", n)
	}
	if got := counter(t, reg, "switchboard_context_lookups_total", "stale"); got != 2 {
		t.Fatalf("stale lookups = %v", got)
	}
}

func TestStoreWithMaxAge(t *testing.T) {
	codec, _ := schemas.NewCodec()
	clock := clockwork.NewFakeClockAt(t0)
	topic := newFakeTopic(record{"e", encode(t, codec, snap("e", 1, t0, nil))})
	s := runStore(t, topic, contexts.WithClock(clock), contexts.WithMaxAge(time.Second))
	clock.Advance(2 * time.Second)
	if _, status := s.Lookup("", "e", 0); status != schemas.ContextStale {
		t.Fatalf("status %s, want stale past WithMaxAge", status)
	}
}

func TestStoreRunOnceAndShutdown(t *testing.T) {
	codec, _ := schemas.NewCodec()
	if _, err := contexts.NewStore(nil, codec); !errors.Is(err, contexts.ErrMissingDependency) {
		t.Fatalf("NewStore(nil) = %v", err)
	}
	s, err := contexts.NewStore(newFakeTopic(), codec)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	<-s.CaughtUp()
	if err := s.Run(context.Background()); !errors.Is(err, contexts.ErrAlreadyStarted) {
		t.Fatalf("second Run = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run after Shutdown = %v", err)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown = %v", err)
	}
}

func TestStoreReportsAReadFailure(t *testing.T) {
	codec, _ := schemas.NewCodec()
	boom := errors.New("broker gone")
	s, _ := contexts.NewStore(readerFunc(func(context.Context, func(key, value []byte), func()) error { return boom }), codec)
	if err := s.Run(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("Run = %v", err)
	}
	if err := s.Ready(); !errors.Is(err, boom) {
		t.Fatalf("Ready = %v", err)
	}
}

type readerFunc func(ctx context.Context, apply func(key, value []byte), caughtUp func()) error

func (f readerFunc) ReadSnapshots(ctx context.Context, apply func(key, value []byte), caughtUp func()) error {
	return f(ctx, apply, caughtUp)
}

// counter returns the value of the counter name{label}, 0 if absent.
func counter(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == label {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// Entities are namespaced by tenant: a lookup in one tenant's namespace
// never finds another tenant's entity of the same id, nor one without a
// tenant. A record whose key is not its tenant and entity, or whose tenant
// or entity id is not one an intent can name, is refused.
func TestStoreKeepsTenantsApart(t *testing.T) {
	codec, _ := schemas.NewCodec()
	clock := clockwork.NewFakeClockAt(t0)
	reg := prometheus.NewRegistry()
	of := func(tenant, entity string, n float64) *schemas.ContextSnapshot {
		s := snap(entity, 1, t0, map[string]float64{"n": n})
		if tenant != "" {
			s.Tenant = &tenant
		}
		return s
	}
	badTenant := of("", "user-9", 9)
	badTenant.Tenant = schemas.Ptr("")
	topic := newFakeTopic(
		record{"user-1", encode(t, codec, of("", "user-1", 1))},
		record{contexts.SnapshotKey("acme", "user-1"), encode(t, codec, of("acme", "user-1", 2))},
		record{contexts.SnapshotKey("globex", "user-1"), encode(t, codec, of("globex", "user-1", 3))},
		record{"user-2", encode(t, codec, of("acme", "user-2", 4))},                                    // acme's, under the bare key
		record{contexts.SnapshotKey("acme", "user-3"), encode(t, codec, of("", "user-3", 5))},          // no tenant, under acme's key
		record{"user 4", encode(t, codec, of("", "user 4", 6))},                                        // not an entity id
		record{contexts.SnapshotKey("a b", "user-5"), encode(t, codec, of("a b", "user-5", 7))},        // not a tenant
		record{"user-9", encode(t, codec, badTenant)},                                                  // an empty tenant
		record{contexts.SnapshotKey("acme", "user-6"), encode(t, codec, of("acme", "user-6", 8))},      // acme's
		record{contexts.SnapshotKey("acme", "user-6"), nil},                                            // and gone
		record{contexts.SnapshotKey("globex", "user-6"), encode(t, codec, of("globex", "user-6", 10))}, // globex's stays
	)
	s := runStore(t, topic, contexts.WithClock(clock), contexts.WithRegisterer(reg))
	for _, tc := range []struct {
		tenant, entity string
		want           float64 // 0: none
	}{
		{"", "user-1", 1},
		{"acme", "user-1", 2},
		{"globex", "user-1", 3},
		{"initech", "user-1", 0},
		{"acme", "user-2", 0},
		{"", "user-2", 0},
		{"acme", "user-3", 0},
		{"", "user-3", 0},
		{"", "user 4", 0},
		{"a b", "user-5", 0},
		{"", "user-9", 0},
		{"acme", "user-6", 0},
		{"globex", "user-6", 10},
	} {
		got, status := s.Lookup(tc.tenant, tc.entity, 0)
		e, ok := s.Get(tc.tenant, tc.entity)
		switch {
		case tc.want == 0 && (got != nil || status != schemas.ContextMissing || ok):
			t.Errorf("(%q, %q): found %+v", tc.tenant, tc.entity, got)
		case tc.want != 0 && (got == nil || got.Features["n"] != tc.want || !ok || e.Snapshot != got):
			t.Errorf("(%q, %q): %+v, want n=%v", tc.tenant, tc.entity, got, tc.want)
		}
	}
	if got := counter(t, reg, "switchboard_context_snapshots_read_total", "invalid"); got != 5 {
		t.Fatalf("invalid records = %v, want 5", got)
	}
}

// A snapshot's age is computed without overflow: one stamped centuries
// before the epoch is old, never fresh through a wrapped subtraction, and
// one stamped far ahead of the clock is not trusted to be fresh either.
func TestStoreAgeDoesNotOverflow(t *testing.T) {
	codec, _ := schemas.NewCodec()
	clock := clockwork.NewFakeClockAt(t0)
	at := func(entity string, ts int64) record {
		return record{entity, encode(t, codec, &schemas.ContextSnapshot{EntityID: entity, Version: 1, SnapshotTs: ts, Features: map[string]float64{}})}
	}
	now := t0.UnixMilli()
	topic := newFakeTopic(
		at("min", math.MinInt64), at("very-old", -9_000_000_000_000_000), at("old", now-60_000),
		at("max", math.MaxInt64), at("far-ahead", now+9_000_000_000_000_000), at("skewed", now+2000), at("now", now),
	)
	s := runStore(t, topic, contexts.WithClock(clock))
	for entity, want := range map[string]schemas.ContextStatus{
		"min": schemas.ContextStale, "very-old": schemas.ContextStale, "old": schemas.ContextFresh,
		"max": schemas.ContextStale, "far-ahead": schemas.ContextStale,
		"skewed": schemas.ContextFresh, "now": schemas.ContextFresh,
	} {
		if _, status := s.Lookup("", entity, time.Hour*24*365*100); status != want {
			t.Errorf("%s: %s, want %s (max age a century)", entity, status, want)
		}
		if e, _ := s.Get("", entity); e.Age < 0 {
			t.Errorf("%s: age %v", entity, e.Age)
		}
	}
	if e, _ := s.Get("", "min"); e.Age < 100*365*24*time.Hour {
		t.Errorf("min: age %v, want the largest", e.Age)
	}
}
