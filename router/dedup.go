package router

import "github.com/switchboard-mcp/switchboard/schemas"

// resolvedEntry remembers an intent after it resolved: enough to ignore a
// duplicate request or response, to let a late answer refresh the fallback
// cache, and to tombstone its changelog record when it is forgotten.
type resolvedEntry struct {
	route     *route
	cacheKey  string
	outcome   schemas.Outcome
	partition int32
	persisted bool // the changelog holds a resolved record for it
}

// generations of the resolved window: an entry is forgotten between window
// and window*(1+1/(generations-1)) after it was added.
const generations = 8

// resolvedWindow remembers resolved intents for about a window. Generations
// of maps rotate, so memory is bounded by the resolution rate, nothing is
// scanned on the hot path, and what a rotation forgets comes in slices.
type resolvedWindow struct {
	spanMs    int64
	rotatedAt int64
	gens      [generations]map[string]resolvedEntry // gens[0] is the newest
	// uncommitted are the ids added since the last committed transaction
	// (exactly_once): an abort forgets them, since their resolution did not
	// happen after all.
	uncommitted []string
}

func newResolvedWindow(windowMs, nowMs int64) *resolvedWindow {
	w := &resolvedWindow{spanMs: max(windowMs/(generations-1), 1), rotatedAt: nowMs}
	for i := range w.gens {
		w.gens[i] = map[string]resolvedEntry{}
	}
	return w
}

func (w *resolvedWindow) add(id string, e resolvedEntry) {
	w.gens[0][id] = e
	w.uncommitted = append(w.uncommitted, id)
}

// restore adds an entry read from the changelog (already committed).
func (w *resolvedWindow) restore(id string, e resolvedEntry) { w.gens[0][id] = e }

func (w *resolvedWindow) get(id string) (resolvedEntry, bool) {
	for _, g := range w.gens {
		if e, ok := g[id]; ok {
			return e, true
		}
	}
	return resolvedEntry{}, false
}

// commit makes the resolutions since the last commit permanent.
func (w *resolvedWindow) commit() {
	clear(w.uncommitted)
	w.uncommitted = w.uncommitted[:0]
}

// rollback forgets the resolutions since the last commit.
func (w *resolvedWindow) rollback() {
	for _, id := range w.uncommitted {
		for _, g := range w.gens {
			delete(g, id)
		}
	}
	w.commit()
}

// rotate starts a new generation for every span that has passed (a clock
// that jumped may pass several) and calls forget with each generation that
// falls out of the window.
func (w *resolvedWindow) rotate(nowMs int64, forget func(map[string]resolvedEntry)) {
	for n := 0; nowMs-w.rotatedAt >= w.spanMs; n++ {
		if n == generations {
			w.rotatedAt = nowMs // everything is out already
			return
		}
		w.rotatedAt += w.spanMs
		oldest := w.gens[generations-1]
		copy(w.gens[1:], w.gens[:generations-1])
		w.gens[0] = make(map[string]resolvedEntry, len(w.gens[1]))
		if len(oldest) > 0 {
			forget(oldest)
		}
	}
	if len(w.uncommitted) > 1<<16 { // at_least_once never commits: do not grow
		w.commit()
	}
}

// forgetPartition drops the entries of a partition this instance gave up.
func (w *resolvedWindow) forgetPartition(partition int32) {
	for _, g := range w.gens {
		for id, e := range g {
			if e.partition == partition {
				delete(g, id)
			}
		}
	}
}
