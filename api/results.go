package api

import (
	"sync"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// DefaultResultsCapacity is the capacity [NewResults] uses when given less
// than 1.
const DefaultResultsCapacity = 10_000

// Results is this instance's view of recent intent results. It holds four
// parts under one mutex, each its own type: a bounded in-memory store
// (store.go: at most a count and a byte budget, evicted oldest first and
// fairly between tenants), the waiters of ?wait requests (waiters.go), the
// in-flight counts (agents.go) and the hub (hub.go), which fans results,
// timeout events and progress out to stream subscribers and does nothing
// else. The
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
	stats   stats
	hub     // the fan-out to stream subscribers (hub.go)
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
	st := newStore(capacity, max(o.maxBytes, MinResultsMaxBytes))
	return &Results{
		st:      st,
		waiters: map[intentKey][]*waiter{},
		stats:   newStats(),
		hub:     newHub(st),
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
	r.fanOutEvent(&r.index, ev, t.IntentID, t.SessionID, t.IntentType)
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
