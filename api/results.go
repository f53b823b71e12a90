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
// the fan-out to WebSocket subscribers. The caller feeds it with [Results.Add]
// from a reader of the results topic. All methods are safe for concurrent use.
//
// Results are shared, not copied: callers must treat an *IntentResult given to
// Add or returned by Get and Wait as read-only.
type Results struct {
	mu      sync.Mutex
	byID    map[string]*entry
	ring    []string // ids in arrival order; once full, ring[next] is the oldest
	next    int
	waiters map[string][]*waiter

	// seq numbers fan-outs so that a subscriber matched twice by one result
	// (by intent id and by session, say) gets it once.
	seq       uint64
	byIntent  map[string]map[*subscriber]struct{} // one-shot: removed on delivery
	bySession map[string]map[*subscriber]struct{}
	byType    map[string]map[*subscriber]struct{}
}

// entry is a stored result and, once a subscriber needed it, its encoded
// stream message.
type entry struct {
	res *schemas.IntentResult
	msg []byte
}

// waiter is one Wait (or ?wait request) for one intent's result.
type waiter struct {
	id string
	c  chan *schemas.IntentResult // buffered 1: Add never blocks on it
}

// sink receives encoded result messages. deliver is called with Results.mu
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
	}
}

// Add stores a result, wakes the waiters for its intent and sends it to every
// matching subscriber. It never blocks on a subscriber: one whose send queue is
// full is disconnected instead. A result for an intent already in the store
// replaces the stored one but is not sent again (each intent has exactly one
// result; a second copy is a redelivery). Add ignores nil and results without
// an intent id.
func (r *Results) Add(res *schemas.IntentResult) {
	if res == nil || res.IntentID == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.byID[res.IntentID]; ok {
		e.res, e.msg = res, nil
		return
	}
	e := &entry{res: res}
	r.store(e)
	if ws := r.waiters[res.IntentID]; ws != nil {
		for _, w := range ws {
			w.c <- res
		}
		delete(r.waiters, res.IntentID)
	}
	r.fanOut(e)
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
// subscriptions are one-shot: they end with the delivery.
func (r *Results) fanOut(e *entry) {
	r.seq++
	res := e.res
	if subs, ok := r.byIntent[res.IntentID]; ok {
		for s := range subs {
			r.deliver(s, e)
			delete(s.intents, res.IntentID)
		}
		delete(r.byIntent, res.IntentID)
	}
	if res.SessionID != nil {
		for s := range r.bySession[*res.SessionID] {
			r.deliver(s, e)
		}
	}
	for s := range r.byType[res.IntentType] {
		r.deliver(s, e)
	}
}

// deliver sends e to s unless s already had it in this fan-out.
func (r *Results) deliver(s *subscriber, e *entry) {
	if s.seq == r.seq || !s.admits(e.res) {
		return
	}
	s.seq = r.seq
	if msg := e.message(); msg != nil {
		s.sink.deliver(msg)
	}
}

// message returns the stream message for e, encoding it on first use: one
// encoding however many subscribers receive it. A result that cannot be
// encoded (an answer that is not JSON) yields nil and is not streamed.
func (e *entry) message() []byte {
	if e.msg == nil {
		b, err := json.Marshal(resultMessage{Type: "result", Result: e.res})
		if err != nil {
			return nil
		}
		e.msg = b
	}
	return e.msg
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
// still under the lock, it calls ack, and sends s the stored results of the
// newly subscribed intent ids (whose subscriptions thereby end at once). So the
// acknowledgement comes before any result it enables, and a result added
// concurrently is sent exactly once, by Add or from the store.
func (r *Results) subscribe(s *subscriber, f subscription, max int, ack func()) error {
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
	if ack != nil {
		ack()
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
		if e, ok := r.byID[id]; ok {
			if msg := e.message(); msg != nil && s.admits(e.res) {
				s.sink.deliver(msg)
			}
			continue
		}
		s.intents[id] = struct{}{}
		addIndex(r.byIntent, id, s)
	}
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
