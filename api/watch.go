package api

import (
	"errors"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// ErrWatchOverflow is a [Watch]'s error when its reader fell more than its
// buffer behind (in events or in bytes): the watch was dropped and its
// channel closed. The reader may watch again and replay what it missed.
var ErrWatchOverflow = errors.New("api: watch buffer overflowed")

// WatchLimit bounds what a [Watch] holds for its reader: Events events (at
// least 1), and Bytes bytes of progress records not yet taken (estimated
// like the result store's entries; 0: no byte bound). One record of any
// size is taken when none waits. The result, the last event, counts
// against Events only: the result store holds it anyway.
type WatchLimit struct {
	Events int
	Bytes  int
}

// WatchEvent is one event of a watched intent: a progress record, or its
// result (the last event). Partition and Offset say where a progress record
// was read on the progress topic (where a result was read on the results
// topic); HasPosition is false for records fed without one.
type WatchEvent struct {
	Progress  *schemas.IntentProgress
	Result    *schemas.IntentResult
	Partition int32
	Offset    int64
	hasPos    bool
}

// HasPosition reports whether Partition and Offset are known.
func (e WatchEvent) HasPosition() bool { return e.hasPos }

// Watch follows one intent for one caller: every progress record of the
// intent the feed reads after the watch began, in order, then the intent's
// result, then the channel closes. Get one with [Results.Watch]; Close it
// when done. It is what Server-Sent Events stream from, and it is the seam
// for any other transport (an MCP call's progress notifications): watch by
// (tenant, intent id), read Events until it closes, Close.
type Watch struct {
	r      *Results
	id     string
	tenant *string // nil: every tenant's (authentication off)
	c      chan WatchEvent
	limit  WatchLimit

	// Set at registration, read-only after: the feed's progress position
	// (live records come from it on), and where the intent's progress
	// began if the feed saw it (starts).
	live     []int64
	start    progressMark
	started  bool
	resolved bool // the result was held when the watch began (or was in the lookup store, intentlookup.go): it is the one event

	// Guarded by Results.mu.
	err    error
	closed bool
	// The estimated sizes of the progress records offered that may still
	// wait in c (the last len(c) offered: c is a queue), and their sum.
	sizes []int
	held  int
}

// Watch registers a watch of intentID as tenant sees it (nil: every
// tenant's, for authentication off), holding what its reader has not taken
// up to limit. If the intent's result is already held (and visible to
// tenant), it is the watch's one event. Results never blocks on a watch:
// one that would pass its limit is dropped (its channel closes, Err returns
// ErrWatchOverflow).
//
// Progress read before the watch began is not sent; Server-Sent Events
// replay it from the History, from where the intent's progress began
// ([Watch.Start]) or from a Last-Event-ID.
func (r *Results) Watch(tenant *string, intentID string, limit WatchLimit) *Watch {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := &Watch{r: r, id: intentID, tenant: tenant, c: make(chan WatchEvent, max(limit.Events, 1)), limit: limit}
	w.live = append([]int64(nil), r.pos.Progress...)
	w.start, w.started = r.prog.starts[intentID]
	if e := r.findFor(tenant, intentID, hasResult); e != nil && w.admitsResult(e.res) {
		w.c <- WatchEvent{Result: e.res, Partition: e.partition, Offset: e.offset, hasPos: e.hasPos}
		w.closed, w.resolved = true, true
		close(w.c)
		return w
	}
	pf := &r.prog
	if pf.watches == nil {
		pf.watches = map[string]map[*Watch]struct{}{}
	}
	set := pf.watches[intentID]
	if set == nil {
		set = map[*Watch]struct{}{}
		pf.watches[intentID] = set
	}
	set[w] = struct{}{}
	return w
}

// Events returns the watch's events: progress records in order, then the
// result; it is closed after the result, on overflow and on Close.
func (w *Watch) Events() <-chan WatchEvent { return w.c }

// Err returns ErrWatchOverflow once the watch was dropped for falling
// behind, nil otherwise.
func (w *Watch) Err() error {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	return w.err
}

// Close unregisters the watch and closes its channel (if it is not closed
// yet). It is idempotent and safe to call concurrently with the feed.
func (w *Watch) Close() {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	w.end(nil)
}

// Live returns the next offset the feed reads in each partition of the
// progress topic when the watch began: the watch's events are the records
// from there on; a replay covers what comes before.
func (w *Watch) Live() []int64 { return w.live }

// Start returns where the feed read the first progress record of the
// intent, if it read one before the watch began.
func (w *Watch) Start() (partition int32, offset int64, ok bool) {
	return w.start.partition, w.start.offset, w.started
}

// end closes w with err and unregisters it. Called under Results.mu.
func (w *Watch) end(err error) {
	if w.closed {
		return
	}
	w.closed, w.err = true, err
	close(w.c)
	if set := w.r.prog.watches[w.id]; set != nil {
		delete(set, w)
		if len(set) == 0 {
			delete(w.r.prog.watches, w.id)
		}
	}
}

// offer queues ev without blocking, or drops the watch if its buffer is
// full, in events or in bytes. Called under Results.mu.
func (w *Watch) offer(ev WatchEvent) {
	size := 0
	if ev.Progress != nil && w.limit.Bytes > 0 {
		size = sizeOfProgress(ev.Progress)
		w.trim()
		if w.held > 0 && w.held+size > w.limit.Bytes {
			w.r.prog.overflows.bytes++
			w.end(ErrWatchOverflow)
			return
		}
	}
	select {
	case w.c <- ev:
		if size > 0 {
			w.sizes = append(w.sizes, size)
			w.held += size
		}
	default:
		w.r.prog.overflows.events++
		w.end(ErrWatchOverflow)
	}
}

// trim forgets the sizes of the records the reader has taken: those before
// the last len(c) offered. The reader may take more meanwhile; that is
// counted at the next offer. Called under Results.mu.
func (w *Watch) trim() {
	n := len(w.sizes) - len(w.c)
	if n <= 0 {
		return
	}
	for _, sz := range w.sizes[:n] {
		w.held -= sz
	}
	if n == len(w.sizes) {
		w.sizes = w.sizes[:0] // the reader caught up: reuse the slice
		return
	}
	w.sizes = w.sizes[n:]
}

// progressOverhead estimates what a progress record costs beyond its
// strings and its partial: the record, its pointers, the event.
const progressOverhead = 256

// sizeOfProgress estimates the bytes a progress record holds.
func sizeOfProgress(p *schemas.IntentProgress) int {
	n := progressOverhead + len(p.IntentID) + len(p.IntentType) + len(p.Agent) +
		len(deref(p.Message)) + len(deref(p.SessionID)) + len(deref(p.Tenant))
	if p.Partial != nil {
		n += len(*p.Partial)
	}
	return n
}

// watchOverflows counts the watches dropped for falling behind, by the
// bound they passed. Guarded by Results.mu.
type watchOverflows struct{ events, bytes uint64 }

// WatchOverflows returns how many watches were dropped for falling behind
// (ErrWatchOverflow) since Results began: past their limit's Events, and
// past its Bytes.
func (r *Results) WatchOverflows() (events, bytes uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.prog.overflows.events, r.prog.overflows.bytes
}

func (w *Watch) admitsProgress(p *schemas.IntentProgress) bool {
	return w.tenant == nil || (p.Tenant != nil && *p.Tenant == *w.tenant)
}

func (w *Watch) admitsResult(res *schemas.IntentResult) bool {
	return w.tenant == nil || tenantOf(res) == *w.tenant
}

// resultToWatches sends a new result to its intent's watches that may see
// it, which then end. Called under Results.mu.
func (r *Results) resultToWatches(e *entry) {
	for w := range r.prog.watches[e.res.IntentID] {
		if !w.admitsResult(e.res) {
			continue // another tenant's: w waits, as for a result that never comes
		}
		w.offer(WatchEvent{Result: e.res, Partition: e.partition, Offset: e.offset, hasPos: e.hasPos})
		w.end(w.err)
	}
}
