package router

import "github.com/switchboard-mcp/switchboard/schemas"

// resolvedEntry remembers an intent after it resolved: enough to ignore a
// duplicate request or response, and to let a late answer refresh the
// fallback cache.
type resolvedEntry struct {
	route    *route
	cacheKey string
	outcome  schemas.Outcome
}

// resolvedWindow remembers resolved intents for at least window and at most
// twice that. Two generations of maps rotate, so memory is bounded by the
// resolution rate and nothing is scanned.
type resolvedWindow struct {
	windowMs  int64
	rotatedAt int64
	cur, prev map[string]resolvedEntry
	// uncommitted are the ids added since the last committed transaction
	// (exactly_once): an abort forgets them, since their resolution did not
	// happen after all.
	uncommitted []string
}

func newResolvedWindow(windowMs, nowMs int64) *resolvedWindow {
	return &resolvedWindow{windowMs: windowMs, rotatedAt: nowMs, cur: map[string]resolvedEntry{}, prev: map[string]resolvedEntry{}}
}

func (w *resolvedWindow) add(id string, e resolvedEntry) {
	w.cur[id] = e
	w.uncommitted = append(w.uncommitted, id)
}

// commit makes the resolutions since the last commit permanent.
func (w *resolvedWindow) commit() {
	clear(w.uncommitted)
	w.uncommitted = w.uncommitted[:0]
}

// rollback forgets the resolutions since the last commit.
func (w *resolvedWindow) rollback() {
	for _, id := range w.uncommitted {
		delete(w.cur, id)
		delete(w.prev, id)
	}
	w.commit()
}

func (w *resolvedWindow) get(id string) (resolvedEntry, bool) {
	if e, ok := w.cur[id]; ok {
		return e, true
	}
	e, ok := w.prev[id]
	return e, ok
}

// rotate drops the older generation once a window has passed.
func (w *resolvedWindow) rotate(nowMs int64) {
	if nowMs-w.rotatedAt < w.windowMs {
		return
	}
	w.prev, w.cur = w.cur, make(map[string]resolvedEntry, len(w.cur))
	w.rotatedAt = nowMs
	if len(w.uncommitted) > 1<<16 { // at_least_once never commits: do not grow
		w.commit()
	}
}
