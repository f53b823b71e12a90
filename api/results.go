package api

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// DefaultResultsCapacity is the capacity [NewResults] uses when given less
// than 1.
const DefaultResultsCapacity = 10_000

// Results is this instance's view of recent intent results: a bounded
// in-memory store (oldest evicted first), the waiters of ?wait requests and
// the fan-out of results and timeout events to WebSocket subscribers. The
// caller feeds it from a reader of the results and timeouts topics: [Results.Begin]
// with the reader's start position, then [Results.AddResult] and
// [Results.AddTimeout] with each record's partition and offset, in the order
// of each partition. All methods are safe for concurrent use.
//
// Results are shared, not copied: callers must treat an *IntentResult given to
// Add or returned by Get and Wait as read-only.
type Results struct {
	mu      sync.Mutex
	byID    map[string]*entry
	ring    []string // ids in arrival order; once full, ring[next] is the oldest
	next    int
	waiters map[string][]*waiter

	// pos is where the feed stands: every record before it has been fanned
	// out. cursor is its text, recomputed when stale.
	pos         Position
	cursor      string
	cursorStale bool

	// seq numbers fan-outs so that a subscriber matched twice by one result
	// (by intent id and by session, say) gets it once.
	seq       uint64
	byIntent  map[string]map[*subscriber]struct{} // one-shot: removed on delivery of the result
	bySession map[string]map[*subscriber]struct{}
	byType    map[string]map[*subscriber]struct{}

	stats stats

	// timeouts keeps the last timeout events, by intent id (tring as ring).
	timeouts map[string]*schemas.IntentTimeout
	tring    []string
	tnext    int

	prog progressFanOut // progress subscriptions and watches (progress.go, watch.go)
}

// entry is a stored result, where it was read (if known) and, once a
// subscriber needed it, its JSON encoding.
type entry struct {
	res       *schemas.IntentResult
	body      []byte
	hasPos    bool
	partition int32
	offset    int64
}

// waiter is one Wait (or ?wait request) for one intent's result.
type waiter struct {
	id string
	c  chan *schemas.IntentResult // buffered 1: Add never blocks on it
}

// sink receives encoded stream messages. deliver is called with Results.mu
// held and must not block nor call back into Results.
type sink interface {
	deliver(msg []byte)
}

// subscriber is one stream connection's registration. Its fields are guarded
// by Results.mu.
type subscriber struct {
	sink     sink
	seq      uint64
	tenant   *string // when set, only this tenant's results (tenant.go)
	intents  map[string]struct{}
	sessions map[string]struct{}
	types    map[string]struct{}

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

	prog progressSubs // the subscriptions that asked for progress (progress.go)
}

func newSubscriber(s sink) *subscriber {
	return &subscriber{
		sink:     s,
		intents:  map[string]struct{}{},
		sessions: map[string]struct{}{},
		types:    map[string]struct{}{},
	}
}

func (s *subscriber) count() int { return len(s.intents) + len(s.sessions) + len(s.types) }

// NewResults returns an empty Results that keeps the last capacity results
// (DefaultResultsCapacity if capacity < 1).
func NewResults(capacity int) *Results {
	if capacity < 1 {
		capacity = DefaultResultsCapacity
	}
	return &Results{
		byID:      make(map[string]*entry, capacity),
		ring:      make([]string, capacity),
		waiters:   map[string][]*waiter{},
		byIntent:  map[string]map[*subscriber]struct{}{},
		bySession: map[string]map[*subscriber]struct{}{},
		byType:    map[string]map[*subscriber]struct{}{},
		stats:     newStats(),
		timeouts:  map[string]*schemas.IntentTimeout{},
		tring:     make([]string, capacity),
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
// disconnected instead. A result for an intent already in the store replaces
// the stored one but is not sent again (each intent has exactly one result; a
// second copy is a redelivery). It ignores nil and results without an
// intent id (but still moves the position past them).
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
	if e, ok := r.byID[res.IntentID]; ok {
		e.res, e.body = res, nil
		return
	}
	r.stats.addResult(res)
	e := &entry{res: res, hasPos: hasPos, partition: partition, offset: offset}
	r.store(e)
	if ws := r.waiters[res.IntentID]; ws != nil {
		for _, w := range ws {
			w.c <- res
		}
		delete(r.waiters, res.IntentID)
	}
	r.fanOut(e)
	r.resultToWatches(e)
}

// AddTimeout sends a timeout event read at partition/offset of the timeouts
// topic to the subscribers of its intent id and of its intent type (a
// timeout event names no session). Timeout events are not stored; the
// intent's result follows them.
func (r *Results) AddTimeout(partition int32, offset int64, t *schemas.IntentTimeout) {
	r.mu.Lock()
	defer r.mu.Unlock()
	hasPos := r.advance(StreamTimeouts, partition, offset)
	if t == nil || t.IntentID == "" {
		return
	}
	r.stats.addTimeout(t)
	r.storeTimeout(t)
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

// store puts a new entry in the map and the ring, evicting the oldest.
func (r *Results) store(e *entry) {
	if old := r.ring[r.next]; old != "" {
		delete(r.byID, old)
	}
	r.ring[r.next] = e.res.IntentID
	r.next = (r.next + 1) % len(r.ring)
	r.byID[e.res.IntentID] = e
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
		msg = ev.frame(c.String())
	} else {
		if ev.msg == nil {
			ev.msg = ev.frame(r.hubCursor())
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
func (ev *event) frame(cursor string) []byte {
	if ev.entry != nil {
		body := ev.entry.encoded()
		if body == nil {
			return nil
		}
		return frame("result", cursor, "result", body)
	}
	if ev.progress != nil {
		body, err := json.Marshal(ev.progress)
		if err != nil {
			return nil
		}
		return frame("progress", cursor, "progress", body)
	}
	body, err := json.Marshal(ev.timeout)
	if err != nil {
		return nil
	}
	return frame("timeout", cursor, "timeout", body)
}

// encoded returns e's result as JSON, encoding it on first use: one
// encoding however many subscribers receive it.
func (e *entry) encoded() []byte {
	if e.body == nil {
		b, err := json.Marshal(e.res)
		if err != nil {
			return nil
		}
		e.body = b
	}
	return e.body
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

// Get returns the result of an intent if it is in the store.
func (r *Results) Get(intentID string) (*schemas.IntentResult, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.byID[intentID]; ok {
		return e.res, true
	}
	return nil, false
}

// Wait returns the result of an intent: at once if it is in the store, else
// when Add brings it, or ctx's error when ctx ends first. The check of the
// store and the registration of the waiter happen under one lock, so a result
// added in between is never missed.
func (r *Results) Wait(ctx context.Context, intentID string) (*schemas.IntentResult, error) {
	res, w := r.await(intentID)
	if res != nil {
		return res, nil
	}
	defer r.release(w)
	select {
	case res := <-w.c:
		return res, nil
	case <-ctx.Done():
		select { // a result that landed at the same moment wins
		case res := <-w.c:
			return res, nil
		default:
			return nil, ctx.Err()
		}
	}
}

// await returns the stored result of an intent or, if there is none yet, a
// registered waiter that Add will wake. The caller must release the waiter.
func (r *Results) await(intentID string) (*schemas.IntentResult, *waiter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.byID[intentID]; ok {
		return e.res, nil
	}
	w := &waiter{id: intentID, c: make(chan *schemas.IntentResult, 1)}
	r.waiters[intentID] = append(r.waiters[intentID], w)
	return nil, w
}

// release unregisters a waiter if Add has not already woken it. It accepts nil.
func (r *Results) release(w *waiter) {
	if w == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ws := r.waiters[w.id]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(r.waiters, w.id)
	} else {
		r.waiters[w.id] = ws
	}
}

// subscribe adds to s the entries of f it does not hold yet, unless s would
// then hold more than max (errTooManySubscriptions, nothing added). Then,
// still under the lock, it calls ack with the cursor for s, and sends s the stored results of the
// newly subscribed intent ids (whose subscriptions thereby end at once). So the
// acknowledgement comes before any result it enables, and a result added
// concurrently is sent exactly once, by Add or from the store.
func (r *Results) subscribe(s *subscriber, f subscription, max int, ack func(cursor string)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	seen := make(map[string]struct{}, len(f.IntentIDs))
	for _, id := range f.IntentIDs {
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		if _, ok := s.intents[id]; !ok {
			n++
		}
	}
	if f.SessionID != "" {
		if _, ok := s.sessions[f.SessionID]; !ok {
			n++
		}
	}
	if f.IntentType != "" {
		if _, ok := s.types[f.IntentType]; !ok {
			n++
		}
	}
	if s.count()+n > max {
		return errTooManySubscriptions
	}
	s.positioned = true
	if ack != nil {
		ack(r.cursorFor(s))
	}
	if f.SessionID != "" {
		s.sessions[f.SessionID] = struct{}{}
		addIndex(r.bySession, f.SessionID, s)
	}
	if f.IntentType != "" {
		s.types[f.IntentType] = struct{}{}
		addIndex(r.byType, f.IntentType, s)
	}
	for id := range seen {
		if _, ok := s.intents[id]; ok {
			continue
		}
		// Another tenant's stored result counts as absent: s subscribes as
		// to an intent whose result has not come (nothing reveals it).
		if e, ok := r.byID[id]; ok && s.admits(e.res) {
			if body := e.encoded(); body != nil {
				r.send(s, frame("result", r.cursorFor(s), "result", body))
			}
			continue
		}
		s.intents[id] = struct{}{}
		addIndex(r.byIntent, id, s)
	}
	r.subscribeProgress(s, f)
	return nil
}

// unsubscribe removes the entries of f from s; entries s does not hold are
// ignored.
func (r *Results) unsubscribe(s *subscriber, f subscription) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range f.IntentIDs {
		delete(s.intents, id)
		removeIndex(r.byIntent, id, s)
	}
	if f.SessionID != "" {
		delete(s.sessions, f.SessionID)
		removeIndex(r.bySession, f.SessionID, s)
	}
	if f.IntentType != "" {
		delete(s.types, f.IntentType)
		removeIndex(r.byType, f.IntentType, s)
	}
	r.unsubscribeProgress(s, f)
}

// unsubscribeAll removes every subscription of s.
func (r *Results) unsubscribeAll(s *subscriber) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := range s.intents {
		removeIndex(r.byIntent, id, s)
	}
	for id := range s.sessions {
		removeIndex(r.bySession, id, s)
	}
	for t := range s.types {
		removeIndex(r.byType, t, s)
	}
	clear(s.intents)
	clear(s.sessions)
	clear(s.types)
	r.unsubscribeAllProgress(s)
}

func addIndex(idx map[string]map[*subscriber]struct{}, key string, s *subscriber) {
	set, ok := idx[key]
	if !ok {
		set = map[*subscriber]struct{}{}
		idx[key] = set
	}
	set[s] = struct{}{}
}

func removeIndex(idx map[string]map[*subscriber]struct{}, key string, s *subscriber) {
	set, ok := idx[key]
	if !ok {
		return
	}
	delete(set, s)
	if len(set) == 0 {
		delete(idx, key)
	}
}
