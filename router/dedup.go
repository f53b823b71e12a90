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
}

func newResolvedWindow(windowMs, nowMs int64) *resolvedWindow {
	return &resolvedWindow{windowMs: windowMs, rotatedAt: nowMs, cur: map[string]resolvedEntry{}, prev: map[string]resolvedEntry{}}
}

func (w *resolvedWindow) add(id string, e resolvedEntry) { w.cur[id] = e }

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
}

func (w *resolvedWindow) len() int { return len(w.cur) + len(w.prev) }
