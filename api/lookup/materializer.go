package lookup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// Record is one Kafka record as a [Source] hands it over.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte // nil: a tombstone
}

// TopicState is a topic as a [Source] sees it now.
type TopicState struct {
	ID   string  // Kafka's topic id; "" if the cluster does not say
	Low  []int64 // per partition, the first offset the topic still holds
	High []int64 // per partition, the end a read_committed reader reads up to (the last stable offset)
}

// FromStart is the offset that, given to [Source.Read] for a partition, reads the
// partition from its first offset.
const FromStart int64 = -2

// Source is what the Materializer reads: the results, timeouts and pending
// changelog topics of Kafka (cmd/switchboard adapts router/kafkaio), or a
// test's records.
type Source interface {
	// Describe returns the state of topic.
	Describe(ctx context.Context, topic string) (TopicState, error)

	// Read reads every partition of the topics in from, each from its
	// offset there (FromStart: its first), committed records only, without
	// a consumer group, until ctx ends or h returns an error. It calls h
	// from one goroutine: Record for each record, in order within a
	// partition; EOF when it reached a partition's end; Idle when nothing
	// came for a while (at most 50 ms).
	Read(ctx context.Context, from map[string][]int64, h Handler) error
}

// Handler receives what [Source.Read] reads.
type Handler interface {
	Record(rec *Record) error
	EOF(topic string, partition int32) error
	Idle() error
}

// Live receives the results, timeout events and progress read from the end
// the topics had when the Materializer started (the live stream of this
// instance): [api.Feed] implements it. Begin comes first, with that end.
type Live interface {
	Begin(pos api.Position)
	Result(partition int32, offset int64, res *schemas.IntentResult)
	Timeout(partition int32, offset int64, t *schemas.IntentTimeout)
	Progress(partition int32, offset int64, p *schemas.IntentProgress)
}

// Config is what a Materializer reads, and where it writes.
type Config struct {
	// Results, Timeouts and Pending are the topics' names; Pending may be
	// empty (no pending states).
	Results, Timeouts, Pending string
	// Progress is the progress topic's name (may be empty): it is not
	// stored, only handed to Live from its end at the start, so that one
	// reader feeds the live stream.
	Progress string

	Store  *Store
	Source Source
	Codec  *schemas.Codec // decodes Avro and JSON
	Live   Live           // nil: none

	Clock  clockwork.Clock // default: the real clock
	Logger *slog.Logger    // default: slog.Default()

	// ExpireEvery is how often the store drops what the topics no longer
	// keep (default 1m).
	ExpireEvery time.Duration
	// FlushRecords and FlushAfter bound how many records and how long a
	// batch gathers before it is committed (default 1000 and 10ms): a
	// lookup sees a record that much after it was read, at most.
	FlushRecords int
	FlushAfter   time.Duration
}

// Materializer keeps a [Store] up to date with the topics: on start it
// checks that the topics are those the store was built from (else it
// empties the store, to rebuild it), resumes each partition from the
// position the store holds (committed with the data), and reads on. The
// store is ready once every partition has been read up to where it ended at
// the start. Records from that end on are also handed to Live, so one
// reader feeds both the store and the instance's live stream.
type Materializer struct {
	cfg   Config
	kinds map[string]Kind

	batch   *Batch
	pos     map[kp]int64 // positions moved by the batch
	opened  time.Time    // when the batch got its first record
	live    map[kp]int64 // where Live begins, per results/timeouts partition
	high    map[kp]int64 // the ends at the start
	left    map[kp]bool  // partitions not yet read up to their end at the start
	started time.Time
	read    int64

	ready      atomic.Bool
	prog       atomic.Int64                    // partitions caught up, for Ready's message
	total      atomic.Int64                    // partitions to catch up on
	unreadable atomic.Pointer[unreadableTopic] // while the start waits for a topic, for Ready's message
}

// unreadableTopic is a topic the Materializer cannot describe yet, and why.
type unreadableTopic struct {
	topic string
	err   error
}

// kindProgress is the progress topic, read for Live only (never stored).
const kindProgress Kind = 'g'

type kp struct {
	k Kind
	p int32
}

// NewMaterializer checks cfg.
func NewMaterializer(cfg Config) (*Materializer, error) {
	switch {
	case cfg.Store == nil, cfg.Source == nil, cfg.Codec == nil:
		return nil, fmt.Errorf("lookup: a Materializer needs a Store, a Source and a Codec")
	case cfg.Results == "" || cfg.Timeouts == "":
		return nil, fmt.Errorf("lookup: a Materializer needs the results and timeouts topics")
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ExpireEvery <= 0 {
		cfg.ExpireEvery = time.Minute
	}
	if cfg.FlushRecords <= 0 {
		cfg.FlushRecords = 1000
	}
	if cfg.FlushAfter <= 0 {
		cfg.FlushAfter = 10 * time.Millisecond
	}
	m := &Materializer{cfg: cfg, kinds: map[string]Kind{cfg.Results: KindResults, cfg.Timeouts: KindTimeouts}}
	if cfg.Pending != "" {
		m.kinds[cfg.Pending] = KindPending
	}
	if cfg.Progress != "" && cfg.Live != nil {
		m.kinds[cfg.Progress] = kindProgress
	}
	return m, nil
}

// Ready returns nil once the store has caught up (see [Materializer]),
// else an error wrapping api.ErrLookupCatchingUp that says how far it is.
func (m *Materializer) Ready() error {
	if m.ready.Load() {
		return nil
	}
	if u := m.unreadable.Load(); u != nil {
		return fmt.Errorf("%w: cannot read topic %s: %v", api.ErrLookupCatchingUp, u.topic, u.err)
	}
	return fmt.Errorf("%w: %d of %d partitions read to their end", api.ErrLookupCatchingUp, m.prog.Load(), m.total.Load())
}

// topics returns the topics read, in kind order.
func (m *Materializer) topics() []string {
	out := []string{m.cfg.Results, m.cfg.Timeouts}
	if m.cfg.Pending != "" {
		out = append(out, m.cfg.Pending)
	}
	return out
}

// Run materialises until ctx ends (it then returns nil) or reading or
// writing fails. It expires what the topics no longer keep in a goroutine
// of its own, which it waits for.
func (m *Materializer) Run(ctx context.Context) error {
	m.started = m.cfg.Clock.Now()
	states := map[string]TopicState{}
	for _, t := range m.topics() {
		st, err := m.describe(ctx, t)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		states[t] = st
	}
	from, err := m.resume(states)
	if err != nil {
		return err
	}
	m.plan(states, from)
	var progress []int64
	if _, ok := m.kinds[m.cfg.Progress]; ok {
		st, err := m.describe(ctx, m.cfg.Progress)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		progress = st.High
		from[m.cfg.Progress] = slices.Clone(st.High)
		for p, high := range st.High {
			m.live[kp{kindProgress, int32(p)}] = high
		}
	}
	if m.cfg.Live != nil {
		m.cfg.Live.Begin(api.Position{Results: states[m.cfg.Results].High, Timeouts: states[m.cfg.Timeouts].High, Progress: progress})
	}
	m.batch = m.cfg.Store.NewBatch()
	defer m.batch.Close()
	m.pos = map[kp]int64{}
	m.checkReady()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		m.expireLoop(ctx, states)
	}()
	err = m.cfg.Source.Read(ctx, from, handler{m})
	if err == nil || ctx.Err() != nil {
		err = m.flush()
	}
	cancel()
	wg.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// describe asks the source for a topic's state until it answers or ctx
// ends (the topic may not exist yet when the instance starts, and nothing
// may create it: topics.auto_create off). Meanwhile Ready names the topic,
// and one warning says so, not one per try.
func (m *Materializer) describe(ctx context.Context, topic string) (TopicState, error) {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		st, err := m.cfg.Source.Describe(ctx, topic)
		if err == nil {
			if m.unreadable.Swap(nil) != nil {
				m.cfg.Logger.Info("lookup store: the topic can be read now", "topic", topic)
			}
			return st, nil
		}
		if prev := m.unreadable.Swap(&unreadableTopic{topic, err}); prev == nil {
			m.cfg.Logger.Warn("lookup store: cannot read a topic; the instance is not ready until it can (if it does not exist: 'switchboard topics create')",
				"topic", topic, "error", err)
		} else {
			m.cfg.Logger.Debug("lookup store: cannot read a topic yet", "topic", topic, "error", err)
		}
		select {
		case <-ctx.Done():
			return TopicState{}, fmt.Errorf("%w: %s: %w", ErrSource, topic, err)
		case <-m.cfg.Clock.After(wait):
		}
	}
}

// resume checks the store against the topics (emptying it when they are
// not those it was built from) and returns where to read each partition
// from.
func (m *Materializer) resume(states map[string]TopicState) (map[string][]int64, error) {
	s := m.cfg.Store
	positions := map[Kind][]int64{}
	reason := ""
	for _, t := range m.topics() {
		k, st := m.kinds[t], states[t]
		pos, err := s.Positions(k)
		if err != nil {
			return nil, err
		}
		positions[k] = pos
		meta, known, err := s.Topic(k)
		if err != nil {
			return nil, err
		}
		if why := changed(t, st, meta, known, pos); why != "" && reason == "" {
			reason = why
		}
	}
	if reason != "" {
		if err := s.Reset(reason); err != nil {
			return nil, err
		}
		clear(positions)
	}
	b := s.NewBatch()
	defer b.Close()
	from := map[string][]int64{}
	for _, t := range m.topics() {
		k, st := m.kinds[t], states[t]
		if err := b.SetTopic(k, TopicMeta{Name: t, ID: st.ID}); err != nil {
			return nil, err
		}
		offs := make([]int64, len(st.High))
		for p := range offs {
			offs[p] = FromStart
			if pos := positions[k]; p < len(pos) && pos[p] >= 0 {
				offs[p] = max(pos[p], st.Low[p])
			}
		}
		from[t] = offs
	}
	if err := b.Commit(); err != nil {
		return nil, err
	}
	return from, nil
}

// changed says why the store cannot resume reading topic t (its state st)
// from positions pos, given what it remembers of the topic (meta, if
// known): "" when it can.
func changed(t string, st TopicState, meta TopicMeta, known bool, pos []int64) string {
	switch {
	case !known && len(pos) > 0:
		return "the store does not say which topic it read"
	case !known:
		return ""
	case meta.Name != t:
		return fmt.Sprintf("built from topic %s, now %s", meta.Name, t)
	case meta.ID != "" && st.ID != "" && meta.ID != st.ID:
		return fmt.Sprintf("topic %s was recreated (id %s, was %s)", t, st.ID, meta.ID)
	case len(pos) > len(st.High):
		return fmt.Sprintf("topic %s has %d partitions, fewer than the %d read", t, len(st.High), len(pos))
	}
	for p, off := range pos {
		if off > st.High[p] {
			return fmt.Sprintf("topic %s[%d] ends at %d, before the %d read: it was recreated", t, p, st.High[p], off)
		}
	}
	return ""
}

// plan notes, per partition, where Live begins and whether there is
// anything to read before the store is ready.
func (m *Materializer) plan(states map[string]TopicState, from map[string][]int64) {
	m.live, m.high, m.left = map[kp]int64{}, map[kp]int64{}, map[kp]bool{}
	for _, t := range m.topics() {
		k, st := m.kinds[t], states[t]
		for p, high := range st.High {
			key := kp{k, int32(p)}
			m.high[key] = high
			if k != KindPending {
				m.live[key] = high
			}
			start := from[t][p]
			if start == FromStart {
				start = st.Low[p]
			}
			if start < high {
				m.left[key] = true
			}
		}
	}
	m.total.Store(int64(len(m.left)))
}

// handler adapts the Materializer to Handler; its methods run on the
// source's goroutine.
type handler struct{ m *Materializer }

func (h handler) Record(rec *Record) error { return h.m.record(rec) }

func (h handler) EOF(topic string, partition int32) error {
	if k, ok := h.m.kinds[topic]; ok {
		h.m.caughtUp(kp{k, partition})
	}
	return h.m.flush()
}

func (h handler) Idle() error { return h.m.flush() }

// record stores one record in the batch and hands live ones to Live.
func (m *Materializer) record(rec *Record) error {
	k, ok := m.kinds[rec.Topic]
	if !ok {
		return nil
	}
	if m.batch.Len() == 0 {
		m.opened = m.cfg.Clock.Now()
	}
	m.read++
	key := kp{k, rec.Partition}
	live := m.cfg.Live != nil && k != KindPending && rec.Offset >= m.live[key]
	var err error
	switch k {
	case kindProgress:
		// Not stored: no position, no batch.
		if !live {
			return nil
		}
		var p *schemas.IntentProgress
		if rec.Value != nil {
			p = &schemas.IntentProgress{}
			if derr := m.cfg.Codec.Decode(rec.Value, p); derr != nil || p.IntentID == "" {
				m.undecodable(rec, derr)
				p = nil
			}
		}
		m.cfg.Live.Progress(rec.Partition, rec.Offset, p)
		return nil
	case KindResults:
		var res *schemas.IntentResult
		if rec.Value != nil {
			res = &schemas.IntentResult{}
			if derr := m.cfg.Codec.Decode(rec.Value, res); derr != nil || res.IntentID == "" {
				m.undecodable(rec, derr)
				res = nil
			} else {
				err = m.batch.Result(rec.Partition, rec.Offset, res)
			}
		}
		if live {
			m.cfg.Live.Result(rec.Partition, rec.Offset, res)
		}
	case KindTimeouts:
		var t *schemas.IntentTimeout
		if rec.Value != nil {
			t = &schemas.IntentTimeout{}
			if derr := m.cfg.Codec.Decode(rec.Value, t); derr != nil || t.IntentID == "" {
				m.undecodable(rec, derr)
				t = nil
			} else {
				err = m.batch.Timeout(rec.Partition, rec.Offset, t)
			}
		}
		if live {
			m.cfg.Live.Timeout(rec.Partition, rec.Offset, t)
		}
	case KindPending:
		if rec.Value == nil {
			err = m.batch.PendingTombstone(rec.Partition, rec.Key)
			break
		}
		var p schemas.PendingIntent
		if derr := m.cfg.Codec.Decode(rec.Value, &p); derr != nil || p.IntentID == "" {
			m.undecodable(rec, derr)
			break
		}
		err = m.batch.Pending(rec.Partition, rec.Key, &p)
	}
	if err != nil {
		return err
	}
	m.pos[key] = rec.Offset + 1
	if m.left[key] && rec.Offset+1 >= m.high[key] {
		m.caughtUp(key)
	}
	if m.batch.Len() >= m.cfg.FlushRecords || m.cfg.Clock.Since(m.opened) >= m.cfg.FlushAfter {
		return m.flush()
	}
	return nil
}

func (m *Materializer) undecodable(rec *Record, err error) {
	if err == nil {
		err = errors.New("no intent_id")
	}
	m.cfg.Logger.Warn("lookup store: undecodable record skipped", "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "error", err)
}

// caughtUp notes that a partition has been read up to its end at the start.
func (m *Materializer) caughtUp(key kp) {
	if m.left[key] {
		delete(m.left, key)
		m.prog.Add(1)
	}
}

// flush commits the batch with the positions it moved the store to, then
// marks the store ready if it has caught up.
func (m *Materializer) flush() error {
	for key, next := range m.pos {
		if err := m.batch.Advance(key.k, key.p, next); err != nil {
			return err
		}
	}
	clear(m.pos)
	if err := m.batch.Commit(); err != nil {
		return err
	}
	m.checkReady()
	return nil
}

func (m *Materializer) checkReady() {
	if len(m.left) > 0 || m.ready.Load() {
		return
	}
	// The store first: whoever sees Ready() nil must also get misses as
	// ErrIntentNotFound, not ErrLookupCatchingUp (a test looked up in the
	// moment between the two).
	m.cfg.Store.ready.Store(true)
	m.ready.Store(true)
	m.cfg.Logger.Info("lookup store caught up", "dir", m.cfg.Store.Dir(), "records_read", m.read,
		"partitions", m.total.Load(), "took", m.cfg.Clock.Since(m.started).Round(time.Millisecond).String())
}

// expireLoop drops from the store what the topics no longer keep: at
// once with the states read at the start, then every ExpireEvery.
func (m *Materializer) expireLoop(ctx context.Context, states map[string]TopicState) {
	for {
		for _, t := range []string{m.cfg.Results, m.cfg.Timeouts} {
			st, ok := states[t]
			if !ok {
				continue
			}
			n, err := m.cfg.Store.Expire(m.kinds[t], st.Low)
			if err != nil {
				m.cfg.Logger.Warn("lookup store: expiry failed", "topic", t, "error", err)
			} else if n > 0 {
				m.cfg.Logger.Debug("lookup store: expired records past retention", "topic", t, "records", n)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-m.cfg.Clock.After(m.cfg.ExpireEvery):
		}
		states = map[string]TopicState{}
		for _, t := range []string{m.cfg.Results, m.cfg.Timeouts} {
			st, err := m.cfg.Source.Describe(ctx, t)
			if err != nil {
				if ctx.Err() == nil {
					m.cfg.Logger.Warn("lookup store: cannot read where a topic starts", "topic", t, "error", err)
				}
				continue
			}
			states[t] = st
		}
	}
}
