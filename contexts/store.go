package contexts

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// Reader reads the compacted context-snapshot topic.
type Reader interface {
	// ReadSnapshots reads every partition of the topic from its beginning
	// and follows it until ctx ends. It calls apply for each record, in
	// order within a partition (key is SnapshotKey of the entity, a nil
	// value a tombstone), and caughtUp once, when every partition has been read up
	// to where it ended when reading began. apply and caughtUp are called
	// from one goroutine. It returns nil when ctx ends, or the error that
	// stopped it.
	ReadSnapshots(ctx context.Context, apply func(key, value []byte), caughtUp func()) error
}

// Entry is what the store holds for one entity, as of the moment it was
// asked.
type Entry struct {
	Snapshot *schemas.ContextSnapshot
	// Age is how long ago the snapshot was computed (now - snapshot_ts,
	// never negative).
	Age time.Duration
	// Status is ContextFresh or ContextStale, against the store's max age.
	Status schemas.ContextStatus
}

// Store holds the newest snapshot of every entity in the context-snapshot
// topic, in memory, and keeps it current: a tombstone deletes an entity, a
// snapshot with a lower version than the one held is ignored. Entities are
// (tenant, entity_id), tenant "" for none: a lookup names the tenant whose
// namespace it reads, and never sees another tenant's entity of the same id.
// Create it with NewStore, fill it with Run. Its methods are safe for
// concurrent use; the snapshots it returns are shared and must not be
// modified.
type Store struct {
	reader Reader
	codec  *schemas.Codec
	clock  clockwork.Clock
	maxAge time.Duration
	log    *slog.Logger
	m      *storeMetrics

	mu       sync.RWMutex
	entities map[string]*schemas.ContextSnapshot // by SnapshotKey

	started  atomic.Bool
	state    atomic.Pointer[error] // nil: caught up and running
	caughtUp chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// StoreOption configures a Store.
type StoreOption func(*storeOptions)

type storeOptions struct {
	clock  clockwork.Clock
	maxAge time.Duration
	reg    prometheus.Registerer
	log    *slog.Logger
}

// WithClock sets the clock snapshot ages are measured on (default: real).
func WithClock(c clockwork.Clock) StoreOption { return func(o *storeOptions) { o.clock = c } }

// WithMaxAge sets how old a snapshot may be and count as fresh when Lookup
// is given no max age, and for Get (default 30s).
func WithMaxAge(d time.Duration) StoreOption { return func(o *storeOptions) { o.maxAge = d } }

// WithRegisterer sets where the store registers its metrics (default: a
// registry of its own, i.e. nowhere visible).
func WithRegisterer(r prometheus.Registerer) StoreOption { return func(o *storeOptions) { o.reg = r } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) StoreOption { return func(o *storeOptions) { o.log = l } }

// DefaultMaxAge is how old a snapshot may be and count as fresh, unless
// configured otherwise.
const DefaultMaxAge = 30 * time.Second

// NewStore returns an empty store that Run fills from r, decoding with codec.
func NewStore(r Reader, codec *schemas.Codec, opts ...StoreOption) (*Store, error) {
	o := storeOptions{clock: clockwork.NewRealClock(), maxAge: DefaultMaxAge, reg: prometheus.NewRegistry(), log: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	if r == nil || codec == nil || o.clock == nil || o.reg == nil || o.log == nil {
		return nil, ErrMissingDependency
	}
	if o.maxAge <= 0 {
		o.maxAge = DefaultMaxAge
	}
	m, err := newStoreMetrics(o.reg)
	if err != nil {
		return nil, err
	}
	s := &Store{
		reader: r, codec: codec, clock: o.clock, maxAge: o.maxAge, log: o.log, m: m,
		entities: map[string]*schemas.ContextSnapshot{},
		caughtUp: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
	}
	s.setState(ErrNotCaughtUp)
	return s, nil
}

func (s *Store) setState(err error) { s.state.Store(&err) }

// Run reads the snapshot topic into the store until ctx ends or Shutdown is
// called (then it returns nil), or reading fails (then it returns why, and
// the store keeps what it holds but is no longer ready). Run may be called
// once.
func (s *Store) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return ErrAlreadyStarted
	}
	defer close(s.done)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := s.reader.ReadSnapshots(ctx, s.apply, s.markCaughtUp)
	if ctx.Err() != nil {
		err = nil
	}
	if err != nil {
		s.setState(err)
	} else {
		s.setState(ErrStopped)
	}
	return err
}

// Shutdown stops Run and waits for it to return or ctx to end. It is safe to
// call more than once, and without Run.
func (s *Store) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stop) })
	if !s.started.Load() {
		return nil
	}
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) markCaughtUp() {
	select {
	case <-s.caughtUp:
		return
	default:
	}
	s.setState(nil)
	close(s.caughtUp)
	s.m.caughtUp.Set(1)
	s.log.Info("context store caught up", "entities", s.Len())
}

// Ready returns nil once the store has caught up with the topic and while it
// keeps reading it; ErrNotCaughtUp before, or why it stopped.
func (s *Store) Ready() error { return *s.state.Load() }

// CaughtUp is closed once the store has caught up with the topic.
func (s *Store) CaughtUp() <-chan struct{} { return s.caughtUp }

// apply takes one record of the topic.
func (s *Store) apply(key, value []byte) {
	entity := string(key)
	if value == nil {
		s.mu.Lock()
		delete(s.entities, entity)
		n := len(s.entities)
		s.mu.Unlock()
		s.m.read.WithLabelValues("tombstone").Inc()
		s.m.entities.Set(float64(n))
		return
	}
	snap := &schemas.ContextSnapshot{}
	if err := s.codec.Decode(value, snap); err != nil {
		s.m.read.WithLabelValues("invalid").Inc()
		s.log.Warn("undecodable context snapshot skipped", "entity_id", entity, "error", err)
		return
	}
	if err := checkEntity(intents.TenantOf(snap.Tenant), snap.EntityID); err != nil || (snap.Tenant != nil && *snap.Tenant == "") {
		s.m.read.WithLabelValues("invalid").Inc()
		s.log.Warn("context snapshot skipped: its tenant or entity_id is not valid", "key", entity, "error", err)
		return
	}
	if want := SnapshotKey(intents.TenantOf(snap.Tenant), snap.EntityID); want != entity {
		s.m.read.WithLabelValues("invalid").Inc()
		s.log.Warn("context snapshot skipped: its key is not its tenant and entity_id", "key", entity, "entity_id", snap.EntityID, "want_key", want)
		return
	}
	s.mu.Lock()
	held := s.entities[entity]
	outdated := held != nil && held.Version > snap.Version
	if !outdated {
		s.entities[entity] = snap
	}
	n := len(s.entities)
	s.mu.Unlock()
	if outdated {
		s.m.read.WithLabelValues("outdated").Inc()
		return
	}
	s.m.read.WithLabelValues("applied").Inc()
	s.m.entities.Set(float64(n))
}

// Lookup returns the snapshot held for entity in tenant's namespace ("" for
// none) and whether it is fresh (at most maxAge old; maxAge <= 0 uses the
// store's max age) or stale; nil and ContextMissing when the store holds
// none. It is what the router calls to attach context to an intent: it
// counts lookups by status and observes the age of what it returns.
func (s *Store) Lookup(tenant, entity string, maxAge time.Duration) (*schemas.ContextSnapshot, schemas.ContextStatus) {
	if maxAge <= 0 {
		maxAge = s.maxAge
	}
	s.mu.RLock()
	snap := s.entities[SnapshotKey(tenant, entity)]
	s.mu.RUnlock()
	if snap == nil {
		s.m.lookupMissing.Inc()
		return nil, schemas.ContextMissing
	}
	age, future := s.ageOf(snap)
	status := statusOf(age, future, maxAge)
	if status == schemas.ContextFresh {
		s.m.lookupFresh.Inc()
	} else {
		s.m.lookupStale.Inc()
	}
	s.m.attachAge.Observe(age.Seconds())
	return snap, status
}

// Get returns what the store holds for entity in tenant's namespace ("" for
// none), judged against the store's max age, without counting it as an
// attachment.
func (s *Store) Get(tenant, entity string) (Entry, bool) {
	s.mu.RLock()
	snap := s.entities[SnapshotKey(tenant, entity)]
	s.mu.RUnlock()
	if snap == nil {
		return Entry{}, false
	}
	age, future := s.ageOf(snap)
	return Entry{Snapshot: snap, Age: age, Status: statusOf(age, future, s.maxAge)}, true
}

// Len returns how many entities the store holds.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.entities)
}

// MaxAge is the store's default max age.
func (s *Store) MaxAge() time.Duration { return s.maxAge }

// ageOf is how old snap is on the store's clock, never negative and never
// overflowing, whatever snapshot_ts holds: a time before the epoch by
// centuries is old (at most maxAge), not fresh through an overflow. future
// reports a snapshot stamped more than FutureSkew ahead of the clock, whose
// time cannot be trusted.
func (s *Store) ageOf(snap *schemas.ContextSnapshot) (age time.Duration, future bool) {
	return ageAt(s.clock.Now().UnixMilli(), snap.SnapshotTs)
}

// maxAgeMs is the largest age a Duration holds, in milliseconds.
const maxAgeMs = int64(math.MaxInt64 / int64(time.Millisecond))

func ageAt(nowMs, tsMs int64) (time.Duration, bool) {
	if tsMs > nowMs {
		return 0, tsMs-nowMs > FutureSkew.Milliseconds() // no overflow: both sides positive
	}
	// nowMs >= tsMs: the difference is positive unless it overflowed.
	d := nowMs - tsMs
	if d < 0 || d > maxAgeMs {
		d = maxAgeMs
	}
	return time.Duration(d) * time.Millisecond, false
}

// statusOf says fresh when a snapshot is at most maxAge old and its time is
// not in the future beyond FutureSkew.
func statusOf(age time.Duration, future bool, maxAge time.Duration) schemas.ContextStatus {
	if future || age > maxAge {
		return schemas.ContextStale
	}
	return schemas.ContextFresh
}

// SnapshotKey is the key of an entity's snapshots in the snapshot topic, and
// in the store: the entity id for tenant "", else intents.Scoped(tenant,
// entity), which no other (tenant, entity) gives.
func SnapshotKey(tenant, entity string) string { return intents.Scoped(tenant, entity) }

// checkEntity reports whether an entity can be named: its id is what an
// intent's context_ref can hold (printable, no spaces), and so is its tenant,
// if any. Then SnapshotKey is unambiguous.
func checkEntity(tenant, entity string) error {
	if !intents.ValidLabel(entity) {
		return fmt.Errorf("%w: entity id %q is not 1 to %d bytes of printable UTF-8 without spaces", ErrInvalidEntity, entity, intents.MaxLabelLen)
	}
	if tenant != "" && !intents.ValidLabel(tenant) {
		return fmt.Errorf("%w: tenant %q is not a tenant", ErrInvalidEntity, tenant)
	}
	return nil
}
