package api

import (
	"encoding/json"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// Progress: the router publishes each accepted progress of a pending intent
// on the progress topic (IntentProgress, keyed by intent id), before the
// intent's result. The feed hands them to [Results.AddProgress] (through a
// [Feed], which holds a result back until its progress has been handed
// over), and Results sends each to:
//
//   - stream subscribers whose subscription asked for it (progress: true),
//     by intent id, session or intent type, as
//     {"type":"progress","cursor":"...","progress":{...IntentProgress...}},
//     through the same queue, cursor and resume machinery as results;
//   - watches ([Results.Watch]), one intent each: Server-Sent Events and
//     anything else that follows one intent for one tenant.
//
// Tenant rules are those of results: a subscriber or watch scoped to a
// tenant receives only that tenant's progress (progress without a tenant
// belongs to no tenant).

// progressFanOut is Results' progress side. Guarded by Results.mu.
type progressFanOut struct {
	index     // made on first use
	watches   map[string]map[*Watch]struct{}
	overflows watchOverflows

	// starts remembers where the progress of recent intents began (the
	// first record the feed read), so that a watch that comes late can be
	// replayed the intent's progress from there. Bounded like the results
	// (sring as ring).
	starts map[string]progressMark
	sring  []string
	snext  int
}

// progressMark is where a record of the progress topic was read.
type progressMark struct {
	partition int32
	offset    int64
}

// AddProgress sends a progress record read at partition/offset of the
// progress topic to the subscribers that asked for its intent's progress
// and to its intent's watches, and moves the feed's position past it. Like
// AddResult it never blocks on a subscriber. Call it for every record of the
// progress topic, in the order of each partition, and before the result of
// the record's intent (a [Feed] sees to that).
func (r *Results) AddProgress(partition int32, offset int64, p *schemas.IntentProgress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	hasPos := r.advance(StreamProgress, partition, offset)
	if p == nil || p.IntentID == "" {
		return
	}
	pf := &r.prog
	if hasPos {
		pf.mark(p.IntentID, progressMark{partition, offset}, r.st.maxEntries)
	}
	ev := &event{kind: StreamProgress, hasPos: hasPos, partition: partition, offset: offset, progress: p}
	r.fanOutEvent(&pf.index, ev, p.IntentID, p.SessionID, p.IntentType)
	for w := range pf.watches[p.IntentID] {
		if w.admitsProgress(p) {
			w.offer(WatchEvent{Progress: p, Partition: partition, Offset: offset, hasPos: hasPos})
		}
	}
}

// mark remembers where an intent's progress began, if it is the first
// record of it seen.
func (pf *progressFanOut) mark(id string, at progressMark, capacity int) {
	if _, ok := pf.starts[id]; ok {
		return
	}
	if pf.starts == nil {
		pf.starts = map[string]progressMark{}
		pf.sring = make([]string, max(capacity, 1))
	}
	if old := pf.sring[pf.snext]; old != "" {
		delete(pf.starts, old)
	}
	pf.sring[pf.snext] = id
	pf.snext = (pf.snext + 1) % len(pf.sring)
	pf.starts[id] = at
}

// admitsProgress reports whether s may receive a progress record: one of its
// tenant (any, without one).
func (s *subscriber) admitsProgress(p *schemas.IntentProgress) bool {
	return s.tenant == nil || (p.Tenant != nil && *p.Tenant == *s.tenant)
}

// subscribeProgress registers the progress half of a subscription that asked
// for it: its session, its intent type, and those of its intent ids s now
// holds (an id whose result was sent at once has no progress to come).
func (h *hub) subscribeProgress(s *subscriber, f subscription) {
	if !f.Progress {
		return
	}
	pf, ps := &h.prog, &s.prog
	if f.SessionID != "" {
		addSet(&ps.sessions, f.SessionID)
		addIndexLazy(&pf.bySession, f.SessionID, s)
	}
	if f.IntentType != "" {
		addSet(&ps.types, f.IntentType)
		addIndexLazy(&pf.byType, f.IntentType, s)
	}
	for _, id := range f.IntentIDs {
		if _, ok := s.intents[id]; ok {
			addSet(&ps.intents, id)
			addIndexLazy(&pf.byIntent, id, s)
		}
	}
}

// unsubscribeProgress removes the progress half of f's entries from s.
func (h *hub) unsubscribeProgress(s *subscriber, f subscription) {
	pf, ps := &h.prog, &s.prog
	for _, id := range f.IntentIDs {
		delete(ps.intents, id)
		removeIndex(pf.byIntent, id, s)
	}
	if f.SessionID != "" {
		delete(ps.sessions, f.SessionID)
		removeIndex(pf.bySession, f.SessionID, s)
	}
	if f.IntentType != "" {
		delete(ps.types, f.IntentType)
		removeIndex(pf.byType, f.IntentType, s)
	}
}

// unsubscribeAllProgress removes every progress subscription of s.
func (h *hub) unsubscribeAllProgress(s *subscriber) {
	h.prog.drop(s, &s.prog)
}

// endProgress ends s's progress subscription to an intent id whose result
// it was sent: no progress of it comes after its result.
func (h *hub) endProgress(s *subscriber, id string) {
	if _, ok := s.prog.intents[id]; ok {
		delete(s.prog.intents, id)
		removeIndex(h.prog.byIntent, id, s)
	}
}

// wantsProgress reports whether s asked for the progress of p's intent.
func (s *subscriber) wantsProgress(p *schemas.IntentProgress) bool {
	ok, _ := s.prog.match(p.IntentID, p.SessionID, p.IntentType)
	return ok
}

// replayProgressMessage returns the message for a replayed progress record
// if s asked for its intent's progress and may see it, or nil.
func (r *Results) replayProgressMessage(s *subscriber, rec Record, cur Position) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := rec.Progress
	if p == nil || !s.admitsProgress(p) || !s.wantsProgress(p) {
		return nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil
	}
	return frame("progress", cur.String(), "progress", b)
}

// registerProgress registers the progress halves of a resume's
// subscriptions (beginReplay's; under Results.mu).
func (r *Results) registerProgress(s *subscriber, subs []subscription) {
	for _, f := range subs {
		r.subscribeProgress(s, f)
	}
}

func addSet(m *map[string]struct{}, key string) {
	if *m == nil {
		*m = map[string]struct{}{}
	}
	(*m)[key] = struct{}{}
}

func addIndexLazy(idx *map[string]map[*subscriber]struct{}, key string, s *subscriber) {
	if *idx == nil {
		*idx = map[string]map[*subscriber]struct{}{}
	}
	addIndex(*idx, key, s)
}
