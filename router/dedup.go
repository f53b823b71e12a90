package router

import "github.com/switchboard-mcp/switchboard/schemas"

// resolvedEntry remembers an intent after it resolved: enough to ignore a
// duplicate request or response, to let a late answer refresh the fallback
// cache, and to tombstone its changelog record when it is forgotten.
type resolvedEntry struct {
	route      *route
	agent      string // the agent it was dispatched to ("" if never routed): a late answer from another is not taken
	cacheKey   string
	logKey     string // the key of its changelog record
	outcome    schemas.Outcome
	partition  int32
	persisted  bool // the changelog holds a resolved record for it
	dispatched bool // it was sent to its agent: an answer may come
	// dispatchedAt is when this router last dispatched it (ms; 0: never,
	// or a previous owner did): a late answer tells its agent's latency
	// (overload.go).
	dispatchedAt int64
}

// generations of the resolved window: an entry is forgotten between window
// and window*(1+1/(generations-1)) after it was added.
const generations = 8

// resolvedWindow remembers resolved intents for about a window, by intent
// key (intentKey: tenant and id). Generations of maps rotate, so memory is
// bounded by the resolution rate, nothing is scanned on the hot path, and
// what a rotation forgets comes in slices.
type resolvedWindow struct {
	spanMs    int64
	rotatedAt int64
	gens      [generations]map[string]resolvedEntry // gens[0] is the newest
	ids       idIndex                               // the tenants that resolved each id
	// undo: keep uncommitted (exactly_once, set by its delivery), the keys
	// added since the last committed transaction: an abort forgets them,
	// since their resolution did not happen after all. at_least_once never
	// rolls back, so it keeps none.
	undo        bool
	uncommitted []string
}

func newResolvedWindow(windowMs, nowMs int64) *resolvedWindow {
	w := &resolvedWindow{spanMs: max(windowMs/(generations-1), 1), rotatedAt: nowMs, ids: idIndex{}}
	for i := range w.gens {
		w.gens[i] = map[string]resolvedEntry{}
	}
	return w
}

func (w *resolvedWindow) add(key string, e resolvedEntry) {
	w.put(key, e)
	if w.undo {
		w.uncommitted = append(w.uncommitted, key)
	}
}

// restore adds an entry read from the changelog (already committed).
func (w *resolvedWindow) restore(key string, e resolvedEntry) { w.put(key, e) }

// put adds an entry to the newest generation, replacing one of the same key
// in any generation. ids holds exactly the keys of the generations, so a new
// key costs one lookup there rather than one per generation.
func (w *resolvedWindow) put(key string, e resolvedEntry) {
	if !w.ids.addNew(key) {
		w.delete(key)
	}
	w.gens[0][key] = e
}

// delete removes key from every generation, leaving the index alone; it
// reports whether key was there.
func (w *resolvedWindow) delete(key string) bool {
	found := false
	for _, g := range w.gens {
		if _, ok := g[key]; ok {
			delete(g, key)
			found = true
		}
	}
	return found
}

func (w *resolvedWindow) get(key string) (resolvedEntry, bool) {
	if !w.ids.has(key) {
		return resolvedEntry{}, false // not in any generation: one lookup
	}
	for _, g := range w.gens {
		if e, ok := g[key]; ok {
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
	for _, key := range w.uncommitted {
		if w.delete(key) {
			w.ids.remove(key)
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
			for key := range oldest {
				w.ids.remove(key)
			}
			forget(oldest)
		}
	}
}

// forgetPartition drops the entries of a partition this instance gave up.
func (w *resolvedWindow) forgetPartition(partition int32) {
	for _, g := range w.gens {
		for key, e := range g {
			if e.partition == partition {
				delete(g, key)
				w.ids.remove(key)
			}
		}
	}
}
