package api

import (
	"sync"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// DefaultResultsCapacity is the capacity [NewResults] uses when given less
// than 1.
const DefaultResultsCapacity = 10_000

// Results is this instance's view of recent intent results: a bounded
// in-memory store (store.go: at most a count and a byte budget, evicted
// oldest first and fairly between tenants), the waiters of ?wait requests and
// the fan-out of results and timeout events to WebSocket subscribers. The
// caller feeds it from a reader of the results and timeouts topics: [Results.Begin]
// with the reader's start position, then [Results.AddResult] and
// [Results.AddTimeout] with each record's partition and offset, in the order
// of each partition. All methods are safe for concurrent use.
//
// An intent is known by its tenant and id (see [Results.Get]): a result
// answers for its own tenant's intent only, never for another tenant's
// intent with the same id.
//
// Results are shared, not copied: callers must treat an *IntentResult given to
// Add or returned by Get and Wait as read-only.
type Results struct {
	mu      sync.Mutex
	st      *store
	waiters waiters

	// pos is where the feed stands: every record before it has been fanned
	// out. cursor is its text, recomputed when stale.
	pos         Position
	cursor      string
	cursorStale bool

	// seq numbers fan-outs so that a subscriber matched twice by one result
	// (by intent id and by session, say) gets it once.
	seq   uint64
	index // its intent-id entries are one-shot: removed on delivery of the result

	stats stats

	prog progressFanOut // progress subscriptions and watches (progress.go, watch.go)
}

// sink receives encoded stream messages. deliver is called with Results.mu
// held and must not block nor call back into Results.
type sink interface {
	deliver(msg []byte)
}

// subscriber is one stream connection's registration. Its fields are guarded
// by Results.mu.
type subscriber struct {
	sink   sink
	seq    uint64
	tenant *string // when set, only this tenant's results (tenant.go)
	filters

	// replay is set while a resume replays history: live messages wait in
	// it and go out after the replayed ones.
	replay *replayState
	// floor is set while the client's resume cursor is ahead of this
	// instance's feed on some partition: live records before it were sent
	// by another instance and are skipped, and cursors never go back.
	floor *Position
	// positioned is set once s subscribed or resumed: from then on the
	// messages it is sent carry cursors.
	positioned bool

	prog filters // the subscriptions that asked for progress (progress.go)
}

func newSubscriber(s sink) *subscriber {
	return &subscriber{sink: s, filters: filters{
		intents:  map[string]struct{}{},
		sessions: map[string]struct{}{},
		types:    map[string]struct{}{},
	}}
}

// ResultsOption sets an optional bound of [NewResults].
type ResultsOption func(*resultsOptions)

type resultsOptions struct{ maxBytes int64 }

// MinResultsMaxBytes is the smallest byte budget [WithResultsMaxBytes]
// takes: smaller ones are raised to it.
const MinResultsMaxBytes = 64 << 10

// WithResultsMaxBytes sets the store's byte budget: the results, their JSON
// encodings and the timeout events it keeps, estimated, at most n bytes
// (DefaultResultsMaxBytes if n < 1; at least MinResultsMaxBytes). A result
// larger than the whole budget is handed to waiters and subscribers but not
// kept.
func WithResultsMaxBytes(n int64) ResultsOption {
	return func(o *resultsOptions) { o.maxBytes = n }
}

// NewResults returns an empty Results that keeps the last capacity intents
// (DefaultResultsCapacity if capacity < 1: their results and timeout events)
// within a byte budget (DefaultResultsMaxBytes, or [WithResultsMaxBytes]).
func NewResults(capacity int, opts ...ResultsOption) *Results {
	if capacity < 1 {
		capacity = DefaultResultsCapacity
	}
	var o resultsOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.maxBytes < 1 {
		o.maxBytes = DefaultResultsMaxBytes
	}
	return &Results{
		st:      newStore(capacity, max(o.maxBytes, MinResultsMaxBytes)),
		waiters: map[intentKey][]*waiter{},
		index: index{
			byIntent:  map[string]map[*subscriber]struct{}{},
			bySession: map[string]map[*subscriber]struct{}{},
			byType:    map[string]map[*subscriber]struct{}{},
		},
		stats: newStats(),
	}
}

// Begin sets the feed's start position: the reader starts each partition of
// the results and timeouts topics at these offsets. Call it once, before the
// first AddResult or AddTimeout. Without it, results carry no cursor and
// resume is refused.
func (r *Results) Begin(pos Position) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pos = pos.Clone()
	r.cursorStale = true
}

// Position returns the feed's position: every record before it has been
// handed to subscribers.
func (r *Results) Position() Position {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pos.Clone()
}

// advance moves the feed's position past a record, if the position holds
// its partition.
func (r *Results) advance(k Stream, partition int32, offset int64) bool {
	offs := r.pos.of(k)
	if partition < 0 || int(partition) >= len(offs) {
		return false
	}
	offs[partition] = max(offs[partition], offset+1)
	r.cursorStale = true
	return true
}

// hubCursor returns the text of the feed's position.
func (r *Results) hubCursor() string {
	if r.cursorStale {
		r.cursor = r.pos.String()
		r.cursorStale = false
	}
	return r.cursor
}

// Add stores a result read from an unknown position (tests, tools): like
// AddResult, but the feed's position does not move.
func (r *Results) Add(res *schemas.IntentResult) { r.add(res, false, 0, 0) }

// AddResult stores a result read at partition/offset of the results topic,
// wakes the waiters for its intent and sends it to every matching
// subscriber. It never blocks on a subscriber: one whose send queue is full is
// disconnected instead. A result for an intent (tenant and id) whose result
// is already in the store is ignored: each intent has exactly one result, so
// a second copy is a redelivery, and the first is what waiters and
// subscribers were given. It ignores nil and results without an intent id
// (but still moves the position past them).
func (r *Results) AddResult(partition int32, offset int64, res *schemas.IntentResult) {
	r.add(res, true, partition, offset)
}

func (r *Results) add(res *schemas.IntentResult, hasPos bool, partition int32, offset int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if hasPos {
		hasPos = r.advance(StreamResults, partition, offset)
	}
	if res == nil || res.IntentID == "" {
		return
	}
	k := keyOf(res)
	if e := r.st.get(k); e != nil && e.res != nil {
		return
	}
	r.stats.addResult(res)
	e := r.st.getOrAdd(k)
	e.res, e.hasPos, e.partition, e.offset = res, hasPos, partition, offset
	r.st.grow(e, sizeOfResult(res))
	r.waiters.wake(k, res)
	r.fanOut(e)
	r.resultToWatches(e)
}

// AddTimeout sends a timeout event read at partition/offset of the timeouts
// topic to the subscribers of its intent id and of its intent type (a
// timeout event names no session). The last timeout event of each intent
// is kept with its result, for GET /v1/intents/{id}.
func (r *Results) AddTimeout(partition int32, offset int64, t *schemas.IntentTimeout) {
	r.mu.Lock()
	defer r.mu.Unlock()
	hasPos := r.advance(StreamTimeouts, partition, offset)
	if t == nil || t.IntentID == "" {
		return
	}
	r.stats.addTimeout(t)
	e := r.st.getOrAdd(intentKey{deref(t.Tenant), t.IntentID})
	var was int64
	if e.timeout != nil {
		was = sizeOfTimeout(e.timeout)
	}
	e.timeout = t
	r.st.grow(e, sizeOfTimeout(t)-was)
	ev := &event{kind: StreamTimeouts, hasPos: hasPos, partition: partition, offset: offset, timeout: t}
	r.seq++
	for s := range r.byIntent[t.IntentID] {
		r.deliver(s, ev)
	}
	if t.SessionID != nil {
		for s := range r.bySession[*t.SessionID] {
			r.deliver(s, ev)
		}
	}
	for s := range r.byType[t.IntentType] {
		r.deliver(s, ev)
	}
}

// fanOut sends e to every subscriber it matches, once each. Intent-id
// subscriptions are one-shot: they end with the delivery (only for the
// subscribers that may see e).
func (r *Results) fanOut(e *entry) {
	r.seq++
	res := e.res
	ev := &event{kind: StreamResults, hasPos: e.hasPos, partition: e.partition, offset: e.offset, entry: e}
	if subs, ok := r.byIntent[res.IntentID]; ok {
		for s := range subs {
			if !s.admitsEvent(ev) {
				continue // another tenant's: s keeps waiting, as for a result that never comes
			}
			r.deliver(s, ev)
			delete(s.intents, res.IntentID)
			delete(subs, s)
			r.endProgress(s, res.IntentID)
		}
		if len(subs) == 0 {
			delete(r.byIntent, res.IntentID)
		}
	}
	if res.SessionID != nil {
		for s := range r.bySession[*res.SessionID] {
			r.deliver(s, ev)
		}
	}
	for s := range r.byType[res.IntentType] {
		r.deliver(s, ev)
	}
}

// deliver sends ev to s unless s already had it in this fan-out, s may not
// see it (another tenant's), or the client's resume cursor is past it.
func (r *Results) deliver(s *subscriber, ev *event) {
	if s.seq == r.seq || !s.admitsEvent(ev) {
		return
	}
	s.seq = r.seq
	var msg []byte
	if s.floor != nil {
		if ev.hasPos && ev.offset < s.floor.at(ev.kind, ev.partition) {
			return
		}
		c := r.pos.max(*s.floor)
		if !r.pos.behind(*s.floor) {
			s.floor = nil
		}
		msg = ev.frame(r.st, c.String())
	} else {
		if ev.msg == nil {
			ev.msg = ev.frame(r.st, r.hubCursor())
		}
		msg = ev.msg
	}
	if msg != nil {
		r.send(s, msg)
	}
}

// send hands msg to s's sink, or, while s replays history, to its queue of
// live messages.
func (r *Results) send(s *subscriber, msg []byte) {
	if rs := s.replay; rs != nil {
		if len(rs.pending) >= rs.limit || rs.bytes+len(msg) > rs.byteLimit {
			rs.overflowed = true
			return
		}
		rs.pending = append(rs.pending, msg)
		rs.bytes += len(msg)
		return
	}
	s.sink.deliver(msg)
}

// cursorFor returns the cursor of a message sent to s now: the feed's
// position, or later where s's resume cursor is ahead of it; "" while s has
// no position yet (it has neither subscribed nor resumed: a cursor then
// would only tell the client to skip what it has not asked for yet).
func (r *Results) cursorFor(s *subscriber) string {
	if !s.positioned {
		return ""
	}
	if s.floor != nil {
		return r.pos.max(*s.floor).String()
	}
	return r.hubCursor()
}

// event is one record on its way to subscribers: a result (entry) or a
// timeout event. msg caches the message with the feed's cursor for one
// fan-out.
type event struct {
	kind      Stream
	hasPos    bool
	partition int32
	offset    int64
	entry     *entry
	timeout   *schemas.IntentTimeout
	progress  *schemas.IntentProgress
	msg       []byte
}

// frame returns the stream message for ev with the given cursor, or nil if
// its record cannot be encoded (an answer that is not JSON).
func (ev *event) frame(st *store, cursor string) []byte {
	if ev.entry != nil {
		body := st.encoded(ev.entry)
		if body == nil {
			return nil
		}
		return frame("result", cursor, "result", body)
	}
	if ev.progress != nil {
		body, err := marshal(ev.progress)
		if err != nil {
			return nil
		}
		return frame("progress", cursor, "progress", body)
	}
	body, err := marshal(ev.timeout)
	if err != nil {
		return nil
	}
	return frame("timeout", cursor, "timeout", body)
}

// frame builds {"type":typ,"cursor":cursor,field:body}. A cursor holds only
// [a-z0-9:,], so it needs no escaping.
func frame(typ, cursor, field string, body []byte) []byte {
	b := make([]byte, 0, len(body)+len(cursor)+len(typ)+len(field)+32)
	b = append(b, `{"type":"`...)
	b = append(b, typ...)
	b = append(b, '"')
	if cursor != "" {
		b = append(b, `,"cursor":"`...)
		b = append(b, cursor...)
		b = append(b, '"')
	}
	b = append(b, `,"`...)
	b = append(b, field...)
	b = append(b, `":`...)
	b = append(b, body...)
	b = append(b, '}')
	return b
}

// Get returns the result of tenant's intent intentID ("" for an intent
// without a tenant) if it is in the store.
func (r *Results) Get(tenant, intentID string) (*schemas.IntentResult, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.st.get(intentKey{tenant, intentID}); e != nil && e.res != nil {
		return e.res, true
	}
	return nil, false
}
