package api

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// DefaultFeedHold is how long a [Feed] holds a result back, at most, for
// progress it has not read yet.
const DefaultFeedHold = time.Second

// feedSeenCap bounds the intents whose last progress sequence a Feed
// remembers while their result has not come.
const feedSeenCap = 100_000

// FeedConfig configures a [Feed]. The zero value works: the real clock,
// DefaultFeedHold, no metrics.
type FeedConfig struct {
	Clock      clockwork.Clock
	Hold       time.Duration
	Registerer prometheus.Registerer
}

// Feed hands [Results] the records of the results, timeouts and progress
// topics in an order that puts each intent's progress before its result.
// Kafka orders records within a partition only, and a reader of several
// topics gets their partitions interleaved as fetches return; the router
// writes an intent's progress before its result (in the same transaction or
// an earlier one) and says in the result how many progress records there
// were (progress_count). So when a result comes whose progress the feed has
// not all handed over, the feed holds it back, and the results after it in
// its partition (so that the partition's position, and the cursors built on
// it, never pass a result not yet sent), until that progress is read, or for
// Hold at most (then it counts the result as released incomplete: progress
// that could not be read, or a feed that started after it). Progress
// repeated by an at-least-once router (a sequence already handed over) moves
// the position but is not sent again.
//
// Call Begin once, then Result, Timeout and Progress from the reader of the
// topics, in the order of each partition, and run Run (it releases overdue
// results). All methods are safe for concurrent use.
type Feed struct {
	r     *Results
	clock clockwork.Clock
	hold  time.Duration

	mu   sync.Mutex
	seen map[string]int64 // by intent (tenant and id): the last progress sequence handed over
	ring []string         // seen's keys in arrival order, to bound it
	next int
	held map[int32]*heldResults // by results partition

	heldTotal, incomplete prometheus.Counter
}

// heldResults are the results of one partition waiting: the first for its
// progress, the rest behind it.
type heldResults struct {
	since time.Time // when the first became the first
	recs  []heldResult
}

type heldResult struct {
	offset int64
	res    *schemas.IntentResult
}

// NewFeed returns a Feed for r.
func NewFeed(r *Results, cfg FeedConfig) (*Feed, error) {
	f := &Feed{
		r: r, clock: cfg.Clock, hold: cfg.Hold,
		seen: map[string]int64{}, ring: make([]string, feedSeenCap), held: map[int32]*heldResults{},
		heldTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_api_results_held_total",
			Help: "Results the API's feed held back until the progress of their intent was read.",
		}),
		incomplete: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_api_results_released_incomplete_total",
			Help: "Held results released after the hold time without all of their intent's progress read.",
		}),
	}
	if f.clock == nil {
		f.clock = clockwork.NewRealClock()
	}
	if f.hold <= 0 {
		f.hold = DefaultFeedHold
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{f.heldTotal, f.incomplete} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return f, nil
}

// Begin sets the feed's start position (Results.Begin).
func (f *Feed) Begin(pos Position) { f.r.Begin(pos) }

// progressKey names an intent as (tenant, id).
func progressKey(tenant *string, id string) string {
	if tenant == nil {
		return "\x00" + id
	}
	return *tenant + "\x00" + id
}

// Progress hands over a progress record read at partition/offset of the
// progress topic, then the results held for it.
func (f *Feed) Progress(partition int32, offset int64, p *schemas.IntentProgress) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p == nil || p.IntentID == "" {
		f.r.AddProgress(partition, offset, nil)
		return
	}
	key := progressKey(p.Tenant, p.IntentID)
	last, known := f.seen[key]
	if p.Sequence <= last {
		f.r.AddProgress(partition, offset, nil) // a repeat: the position moves, nothing is sent
		return
	}
	if !known {
		f.remember(key)
	}
	f.seen[key] = p.Sequence
	f.r.AddProgress(partition, offset, p)
	f.releaseReady(f.clock.Now())
}

// remember adds key to the bounded set of intents with progress seen.
func (f *Feed) remember(key string) {
	if old := f.ring[f.next]; old != "" {
		delete(f.seen, old)
	}
	f.ring[f.next] = key
	f.next = (f.next + 1) % len(f.ring)
}

// Result hands over a result read at partition/offset of the results topic,
// or holds it (and the partition's later results) until its progress has
// been handed over.
func (f *Feed) Result(partition int32, offset int64, res *schemas.IntentResult) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h := f.held[partition]; h != nil {
		h.recs = append(h.recs, heldResult{offset, res})
		return
	}
	if f.ready(res) {
		f.deliver(partition, heldResult{offset, res})
		return
	}
	f.heldTotal.Inc()
	f.held[partition] = &heldResults{since: f.clock.Now(), recs: []heldResult{{offset, res}}}
}

// Timeout hands over a timeout event (never held: nothing orders it against
// progress).
func (f *Feed) Timeout(partition int32, offset int64, t *schemas.IntentTimeout) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.r.AddTimeout(partition, offset, t)
}

// ready reports whether res's progress has all been handed over.
func (f *Feed) ready(res *schemas.IntentResult) bool {
	if res == nil || res.ProgressCount == nil || *res.ProgressCount <= 0 {
		return true
	}
	return f.seen[progressKey(res.Tenant, res.IntentID)] >= *res.ProgressCount
}

// deliver hands a result to Results and forgets its intent's progress.
func (f *Feed) deliver(partition int32, h heldResult) {
	if h.res != nil {
		delete(f.seen, progressKey(h.res.Tenant, h.res.IntentID))
	}
	f.r.AddResult(partition, h.offset, h.res)
}

// releaseReady hands over the held results whose progress has come, and
// those behind them in their partition up to the next that waits.
func (f *Feed) releaseReady(now time.Time) {
	for partition, h := range f.held {
		f.release(partition, h, now, false)
	}
}

// release hands over h's results from the first on while they are ready
// (the first regardless, when force is set).
func (f *Feed) release(partition int32, h *heldResults, now time.Time, force bool) {
	i := 0
	for ; i < len(h.recs); i++ {
		if !f.ready(h.recs[i].res) {
			if !force || i > 0 {
				break
			}
			f.incomplete.Inc()
		}
		f.deliver(partition, h.recs[i])
	}
	if i == len(h.recs) {
		delete(f.held, partition)
		return
	}
	if i > 0 {
		clear(h.recs[:i])
		h.recs = h.recs[i:]
		h.since = now
		f.heldTotal.Inc()
	}
}

// releaseOverdue releases the results held for Hold or longer.
func (f *Feed) releaseOverdue() {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clock.Now()
	for partition, h := range f.held {
		for h != nil && now.Sub(h.since) >= f.hold {
			f.release(partition, h, now, true)
			h = f.held[partition]
		}
	}
}

// Run releases overdue results every quarter of Hold until ctx ends.
func (f *Feed) Run(ctx context.Context) error {
	t := f.clock.NewTicker(max(f.hold/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.Chan():
			f.releaseOverdue()
		}
	}
}
