package lag

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
)

// State is what the Sampler knows of an agent's consumer group.
type State string

// States of an agent's consumer group. Lag figures exist for stable, empty
// and rebalancing groups only: a missing group has consumed nothing, which
// is not the same as being caught up.
const (
	StateUnknown     State = "unknown"     // not sampled yet
	StateStable      State = "stable"      // it has members and an assignment
	StateEmpty       State = "empty"       // it has committed offsets but no member: nobody consumes
	StateRebalancing State = "rebalancing" // its members are joining or syncing
	StateMissing     State = "missing"     // no such group: never joined, or its offsets expired
	StateError       State = "error"       // the last sample of it failed
)

// States lists every State, in the order the metrics export them.
var States = []State{StateUnknown, StateStable, StateEmpty, StateRebalancing, StateMissing, StateError}

// Group is one agent's consumer group as the configuration names it.
type Group struct {
	Agent   string // the agent's name
	GroupID string // the consumer group its instances share
	Topic   string // the topic it reads its AgentRequests from
}

// GroupInfo is what the cluster says of a consumer group.
type GroupInfo struct {
	// State is StateStable, StateEmpty, StateRebalancing or StateMissing.
	State   State
	Members int
}

// Extent is a partition's first offset still held and its end: the offset
// the next record will get, or the last stable offset (the first offset of
// a transaction still open), whichever a read_committed reader stops at.
type Extent struct {
	Start, End int64
}

// NoRecord is what Admin.FirstTimestamps maps a partition to when nothing a
// read_committed reader would hand over lies between the offset asked for
// and the partition's end (only transaction markers or aborted records).
const NoRecord int64 = -1

// Admin is what the Sampler asks the cluster. Every method honours ctx and
// bounds its own wait; it must be safe to call from one goroutine at a time
// (the Sampler never calls it concurrently).
type Admin interface {
	// DescribeGroups returns every group asked for, by id; a group that does
	// not exist is StateMissing, not an error.
	DescribeGroups(ctx context.Context, groupIDs []string) (map[string]GroupInfo, error)
	// Extents returns every partition of every topic asked for, by topic
	// and partition.
	Extents(ctx context.Context, topics []string) (map[string]map[int32]Extent, error)
	// Committed returns the group's committed offsets on topic's partitions;
	// a partition without one is absent.
	Committed(ctx context.Context, groupID, topic string, partitions []int32) (map[int32]int64, error)
	// FirstTimestamps reads, in each partition of topic in from, the first
	// committed record at or after from[p], and returns its timestamp in
	// unix milliseconds, or NoRecord. A partition it could not read within
	// its bound is absent.
	FirstTimestamps(ctx context.Context, topic string, from map[int32]int64) (map[int32]int64, error)
}

// PartitionLag is one partition of an agent's topic.
type PartitionLag struct {
	Partition int32 `json:"partition"`
	// Committed is the group's committed offset, -1 without one (the lag
	// then counts from the partition's first offset).
	Committed int64 `json:"committed"`
	End       int64 `json:"end"`
	// Records is End minus where the group stands, in offsets (transaction
	// markers included, as Kafka's own tools count); 0 when nothing but
	// markers is left.
	Records int64 `json:"records"`
}

// AgentLag is one agent's consumer group at its last sample.
type AgentLag struct {
	Agent   string
	GroupID string
	State   State
	Members int
	// Records is the AgentRequests the group has not consumed, summed over
	// the partitions. Meaningful only when HasLag.
	Records int64
	// OldestAge is how old the oldest of them was at SampledAt (now minus
	// its record timestamp), 0 with none. Meaningful only when HasAge.
	OldestAge  time.Duration
	HasAge     bool
	Partitions []PartitionLag
	SampledAt  time.Time
	// Err says why the last sample failed (StateError), or why the age is
	// unknown.
	Err string
}

// HasLag reports whether Records means something: the group exists and the
// sample succeeded.
func (a AgentLag) HasLag() bool {
	return a.State == StateStable || a.State == StateEmpty || a.State == StateRebalancing
}

// MarshalJSON writes the lag as GET /v1/agents shows it: records,
// oldest_age_ms and partitions only when known, so that a missing group
// never reads as zero lag.
func (a AgentLag) MarshalJSON() ([]byte, error) {
	type view struct {
		GroupID     string         `json:"group_id"`
		State       State          `json:"state"`
		Members     *int           `json:"members,omitempty"`
		Records     *int64         `json:"records,omitempty"`
		OldestAgeMs *int64         `json:"oldest_age_ms,omitempty"`
		Partitions  []PartitionLag `json:"partitions,omitempty"`
		SampledAt   int64          `json:"sampled_at,omitempty"`
		Error       string         `json:"error,omitempty"`
	}
	v := view{GroupID: a.GroupID, State: a.State, Error: a.Err}
	if !a.SampledAt.IsZero() {
		v.SampledAt = a.SampledAt.UnixMilli()
	}
	if a.HasLag() {
		members, records := a.Members, a.Records
		v.Members, v.Records, v.Partitions = &members, &records, a.Partitions
		if a.HasAge {
			ms := a.OldestAge.Milliseconds()
			v.OldestAgeMs = &ms
		}
	}
	return json.Marshal(v)
}

// Sampler measures, every interval, how far each agent's consumer group is
// behind its topic, and exports it (see the package doc). Create it with
// NewSampler, run it with Run, stop it with Shutdown. Agent is safe for
// concurrent use.
type Sampler struct {
	admin    Admin
	groups   []Group
	ids      []string // distinct group ids
	topics   []string // distinct topics
	clock    clockwork.Clock
	interval time.Duration
	log      *slog.Logger

	router *Group // the router's own group on the requests topic; nil: not sampled

	mu        sync.RWMutex
	latest    map[string]AgentLag // by agent; replaced whole, never modified
	latestOwn AgentLag            // the router's group (Agent ""), at the last sample

	started  atomic.Bool
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// Option configures a Sampler.
type Option func(*options)

type options struct {
	clock    clockwork.Clock
	interval time.Duration
	reg      prometheus.Registerer
	log      *slog.Logger
	router   *Group
}

// WithRouterGroup makes the Sampler measure the router's own consumer group
// on the requests topic too, the way it measures the agents' (Router
// answers for it): the backlog of intents no router has read yet, the same
// on every instance.
func WithRouterGroup(groupID, requestsTopic string) Option {
	return func(o *options) { o.router = &Group{GroupID: groupID, Topic: requestsTopic} }
}

// WithClock sets the clock the interval and the ages run on (default: real).
func WithClock(c clockwork.Clock) Option { return func(o *options) { o.clock = c } }

// WithInterval sets how long the Sampler waits after a sample before the
// next (default DefaultInterval).
func WithInterval(d time.Duration) Option { return func(o *options) { o.interval = d } }

// WithRegisterer sets where the Sampler registers its metrics (default: a
// registry of its own, i.e. nowhere visible).
func WithRegisterer(r prometheus.Registerer) Option { return func(o *options) { o.reg = r } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// DefaultInterval is the sampling interval unless configured otherwise.
const DefaultInterval = 15 * time.Second

// NewSampler returns a Sampler of groups that asks admin. It registers its
// metrics; it starts nothing.
func NewSampler(admin Admin, groups []Group, opts ...Option) (*Sampler, error) {
	o := options{clock: clockwork.NewRealClock(), interval: DefaultInterval, reg: prometheus.NewRegistry(), log: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	if admin == nil || o.clock == nil || o.reg == nil || o.log == nil {
		return nil, ErrMissingDependency
	}
	if o.interval <= 0 {
		return nil, fmt.Errorf("%w: %s", ErrBadInterval, o.interval)
	}
	s := &Sampler{
		admin: admin, groups: slices.Clone(groups), clock: o.clock, interval: o.interval, log: o.log,
		latest: make(map[string]AgentLag, len(groups)),
		stop:   make(chan struct{}), done: make(chan struct{}),
	}
	if r := o.router; r != nil {
		if r.GroupID == "" || r.Topic == "" {
			return nil, fmt.Errorf("%w: the router's group %q on topic %q: each needs both", ErrBadGroup, r.GroupID, r.Topic)
		}
		s.router = r
		s.latestOwn = AgentLag{GroupID: r.GroupID, State: StateUnknown}
	}
	slices.SortFunc(s.groups, func(a, b Group) int { return cmp.Compare(a.Agent, b.Agent) })
	for _, g := range s.groups {
		if g.Agent == "" || g.GroupID == "" || g.Topic == "" {
			return nil, fmt.Errorf("%w: agent %q, group %q, topic %q: each needs all three", ErrBadGroup, g.Agent, g.GroupID, g.Topic)
		}
		if _, dup := s.latest[g.Agent]; dup {
			return nil, fmt.Errorf("%w: agent %q is named twice", ErrBadGroup, g.Agent)
		}
		s.latest[g.Agent] = AgentLag{Agent: g.Agent, GroupID: g.GroupID, State: StateUnknown}
		if !slices.Contains(s.ids, g.GroupID) {
			s.ids = append(s.ids, g.GroupID)
		}
		if !slices.Contains(s.topics, g.Topic) {
			s.topics = append(s.topics, g.Topic)
		}
	}
	if s.router != nil {
		if !slices.Contains(s.ids, s.router.GroupID) {
			s.ids = append(s.ids, s.router.GroupID)
		}
		if !slices.Contains(s.topics, s.router.Topic) {
			s.topics = append(s.topics, s.router.Topic)
		}
	}
	if err := o.reg.Register(&agentCollector{s: s}); err != nil {
		return nil, fmt.Errorf("lag: registering metrics: %w", err)
	}
	return s, nil
}

// Agent returns the agent's lag at the last sample (State unknown before the
// first), and false for an agent the Sampler does not know. Its Partitions
// are shared: do not modify them.
func (s *Sampler) Agent(name string) (AgentLag, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	a, ok := s.latest[name]
	return a, ok
}

// Router returns the router's group at the last sample (Agent "", State
// unknown before the first): its Records are the requests no router has
// consumed, its OldestAge how long the oldest of them had waited at
// SampledAt. It returns false without WithRouterGroup. Its Partitions are
// shared: do not modify them.
func (s *Sampler) Router() (AgentLag, bool) {
	if s.router == nil {
		return AgentLag{}, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.latestOwn, true
}

// Run samples at once, then again interval after each sample ends, until
// ctx ends or Shutdown is called; it returns nil then. A failed sample is
// reported (StateError), not returned. Run may be called once.
func (s *Sampler) Run(ctx context.Context) error {
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
	for {
		s.sample(ctx)
		// A timer per wait, not a ticker: samples never overlap, and a test's
		// BlockUntil(1) on the fake clock returns once a sample is published.
		t := s.clock.NewTimer(s.interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.Chan():
		}
	}
}

// Shutdown stops Run and waits for it to return or ctx to end. It is safe to
// call more than once, and without Run.
func (s *Sampler) Shutdown(ctx context.Context) error {
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

// sample measures every group once and publishes the result, unless ctx
// ended meanwhile (a sample cut short by Shutdown is not an error).
func (s *Sampler) sample(ctx context.Context) {
	if len(s.groups) == 0 && s.router == nil {
		return
	}
	now := s.clock.Now()
	out := make(map[string]AgentLag, len(s.groups))
	var own AgentLag
	failAll := func(err error) {
		for _, g := range s.groups {
			out[g.Agent] = AgentLag{Agent: g.Agent, GroupID: g.GroupID, State: StateError, SampledAt: now, Err: err.Error()}
		}
		if s.router != nil {
			own = AgentLag{GroupID: s.router.GroupID, State: StateError, SampledAt: now, Err: err.Error()}
		}
	}
	infos, err := s.admin.DescribeGroups(ctx, s.ids)
	if err == nil {
		var extents map[string]map[int32]Extent
		if extents, err = s.admin.Extents(ctx, s.topics); err == nil {
			for _, g := range s.groups {
				out[g.Agent] = s.sampleGroup(ctx, g, infos, extents[g.Topic], now)
			}
			if s.router != nil {
				own = s.sampleGroup(ctx, *s.router, infos, extents[s.router.Topic], now)
			}
		}
	}
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		failAll(err)
	}
	s.publish(out, own)
}

// sampleGroup measures one group against its topic's extents.
func (s *Sampler) sampleGroup(ctx context.Context, g Group, infos map[string]GroupInfo, extents map[int32]Extent, now time.Time) AgentLag {
	al := AgentLag{Agent: g.Agent, GroupID: g.GroupID, SampledAt: now}
	info, ok := infos[g.GroupID]
	if !ok {
		al.State, al.Err = StateError, fmt.Sprintf("lag: group %s was not described", g.GroupID)
		return al
	}
	al.State, al.Members = info.State, info.Members
	if !al.HasLag() {
		return al
	}
	if len(extents) == 0 {
		al.State, al.Err = StateError, fmt.Sprintf("lag: topic %s has no partitions (does it exist?)", g.Topic)
		return al
	}
	parts := make([]int32, 0, len(extents))
	for p := range extents {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	committed, err := s.admin.Committed(ctx, g.GroupID, g.Topic, parts)
	if err != nil {
		al.State, al.Err = StateError, err.Error()
		return al
	}
	al.Partitions = make([]PartitionLag, len(parts))
	probe := map[int32]int64{}
	for i, p := range parts {
		e := extents[p]
		pl := PartitionLag{Partition: p, Committed: -1, End: e.End}
		from := e.Start
		if c, ok := committed[p]; ok && c >= 0 {
			pl.Committed = c
			from = max(c, e.Start) // below Start: retention deleted what it had not read
		}
		if pl.Records = max(0, e.End-from); pl.Records > 0 {
			probe[p] = from
		}
		al.Partitions[i] = pl
	}
	al.HasAge = true
	if len(probe) > 0 {
		s.age(ctx, g.Topic, &al, probe)
	}
	for _, pl := range al.Partitions {
		al.Records += pl.Records
	}
	return al
}

// age reads the oldest unconsumed request of each lagging partition and
// sets the agent's OldestAge; a partition with nothing but transaction
// markers left is not lagging after all.
func (s *Sampler) age(ctx context.Context, topic string, al *AgentLag, probe map[int32]int64) {
	ts, err := s.admin.FirstTimestamps(ctx, topic, probe)
	if err != nil {
		al.HasAge, al.Err = false, err.Error()
		return
	}
	oldest, unread := int64(0), false
	for i := range al.Partitions {
		pl := &al.Partitions[i]
		if _, lagging := probe[pl.Partition]; !lagging {
			continue
		}
		t, ok := ts[pl.Partition]
		switch {
		case !ok:
			unread = true
		case t == NoRecord:
			pl.Records = 0
		case oldest == 0 || t < oldest:
			oldest = t
		}
	}
	switch {
	case oldest > 0:
		// With a partition unread, the oldest read is a lower bound.
		al.OldestAge = max(0, time.Duration(al.SampledAt.UnixMilli()-oldest)*time.Millisecond)
	case unread:
		al.HasAge, al.Err = false, "lag: no unconsumed request could be read in time"
	}
}

// publish makes out the latest sample and logs the agents whose state
// changed.
func (s *Sampler) publish(out map[string]AgentLag, own AgentLag) {
	s.mu.Lock()
	prev, prevOwn := s.latest, s.latestOwn
	s.latest = out
	if s.router != nil {
		s.latestOwn = own
	}
	s.mu.Unlock()
	if s.router != nil && own.State == StateError && prevOwn.State != StateError {
		s.log.Warn("sampling the router's backlog failed", "group", own.GroupID, "error", own.Err)
	}
	for _, g := range s.groups {
		was, now := prev[g.Agent], out[g.Agent]
		if was.State == now.State {
			continue
		}
		// At start agents may join after the router: their group's first
		// state is news, not a warning (the alerts wait minutes anyway).
		warn := s.log.Warn
		if was.State == StateUnknown {
			warn = s.log.Info
		}
		switch now.State {
		case StateMissing:
			warn("agent's consumer group does not exist: nobody has consumed its requests", "agent", g.Agent, "group", g.GroupID, "topic", g.Topic)
		case StateEmpty:
			warn("agent's consumer group has no members: nobody consumes its requests", "agent", g.Agent, "group", g.GroupID)
		case StateError:
			s.log.Warn("sampling an agent's lag failed", "agent", g.Agent, "group", g.GroupID, "error", now.Err)
		default:
			if was.State != StateUnknown && was.State != StateStable {
				s.log.Info("agent's consumer group is back", "agent", g.Agent, "group", g.GroupID, "state", now.State)
			}
		}
	}
}
