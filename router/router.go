package router

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// Option configures a Router.
type Option func(*options)

type options struct {
	clock        clockwork.Clock
	log          *slog.Logger
	reg          prometheus.Registerer
	drainTimeout time.Duration
	queue        int
	queueBytes   int64
	restorer     port.Restorer
	feed         port.FallbackFeed
	commitClock  clockwork.Clock
	rnd          *rand.Rand
	contexts     ContextLookup
	tracer       trace.TracerProvider // tracing.go; nil: off
	// processMemory is the process's memory budget, whose resident set
	// the byte gate watches (router/budget.go); 0: not watched.
	processMemory int64
}

// WithClock sets the clock the router's deadlines and ticker run on.
func WithClock(c clockwork.Clock) Option { return func(o *options) { o.clock = c } }

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithRegisterer sets where the router's metrics are registered.
func WithRegisterer(r prometheus.Registerer) Option { return func(o *options) { o.reg = r } }

// WithDrainTimeout bounds how long Run waits, after its context ends, for the
// broker to acknowledge outputs already produced (default 10s).
func WithDrainTimeout(d time.Duration) Option { return func(o *options) { o.drainTimeout = d } }

// WithQueue sets the capacity of the channel from the poll goroutine to the
// event loop (default 4096 records).
func WithQueue(n int) Option { return func(o *options) { o.queue = n } }

// WithQueueBytes bounds the bytes of the records (keys and values) on their
// way from the poll goroutine to the event loop (default 32 MiB): past it
// the poll goroutine pauses its partitions, as when the queue is full, so
// that a burst of large records waits in Kafka rather than in memory.
func WithQueueBytes(n int64) Option { return func(o *options) { o.queueBytes = n } }

// WithRestorer sets where the router restores the pending intents of the
// partitions it is assigned. Without one, it restores nothing.
func WithRestorer(r port.Restorer) Option { return func(o *options) { o.restorer = r } }

// WithCommitClock sets the clock that paces exactly_once commits (default:
// the router's clock). Tests that drive deadlines with a fake clock let
// commits run on real time with it.
func WithCommitClock(c clockwork.Clock) Option { return func(o *options) { o.commitClock = c } }

// WithRand sets the random source of retry jitter (default: math/rand/v2's
// global source). Tests pass a seeded one.
func WithRand(r *rand.Rand) Option { return func(o *options) { o.rnd = r } }

// WithFallbackFeed sets the reader of the shared fallback-cache topic.
// Without one, the fallback cache holds only the answers this instance saw.
func WithFallbackFeed(f port.FallbackFeed) Option { return func(o *options) { o.feed = f } }

// WithProcessMemory sets the process's memory budget in bytes
// (router.memory_limit_bytes, or what 'serve' derives from the byte
// budgets): while intents are pending, the requests partitions pause once
// the process's resident set reaches 90% of it, and resume below 81%
// (router/budget.go). 0, the default: the resident set is not watched.
func WithProcessMemory(n int64) Option { return func(o *options) { o.processMemory = n } }

// Router routes intents. Create it with New, start it with Run.
type Router struct {
	cfg    *config.Config
	src    port.Source
	sink   port.Sink
	d      delivery // exactly_once or at_least_once, chosen in New
	opts   options
	m      *metrics
	engine *engine

	events       chan any         // poll goroutine -> event loop
	revokes      chan revokeReq   // the Source's revoke hook -> event loop
	rewinds      chan struct{}    // event loop -> poll goroutine: seek to committed and restore
	reconfigs    chan reconfigReq // Reconfigure -> event loop (reconfigure.go)
	feed         chan *schemas.FallbackAnswer
	backpressure atomic.Bool  // event loop -> poll goroutine: pause requests (max_pending)
	pendingBytes atomic.Int64 // event loop -> poll goroutine: the pending intents' bytes
	queuedBytes  atomic.Int64 // bytes of the records in events, until handled
	health       atomic.Pointer[healthState]
	agents       atomic.Pointer[[]AgentView] // published by the event loop
	viewsAt      int64                       // event loop: when agents was last published
	started      atomic.Bool
	stop         chan struct{} // closed by Shutdown
	stopOnce     sync.Once
	done         chan struct{} // closed when Run returns
	closing      chan struct{} // closed when the loop has finished, before the Source closes

	// Event-loop state.
	assigned   map[port.TopicPartition]bool // what this instance owns
	partitions int32
}

// healthState says why the router is not healthy; err == nil when it is.
type healthState struct{ err error }

func (r *Router) setHealth(err error) { r.health.Store(&healthState{err}) }

// revokeReq asks the event loop to commit (or, when lost, abort) and forget
// partitions.
type revokeReq struct {
	tps  []port.TopicPartition
	lost bool
	done chan struct{}
}

// restored is what the poll goroutine read for partitions just assigned (or,
// after an abort, for every partition it owns).
type restored struct {
	tps       []port.TopicPartition
	pending   map[int32][]port.PendingRecord
	committed map[port.TopicPartition]int64
	took      time.Duration
	rewind    bool
}

// New builds a router over a Source and a Sink. The codec decodes what the
// router reads and encodes what it writes. With delivery exactly_once the
// sink must be a TxSink.
func New(cfg *config.Config, codec *schemas.Codec, src port.Source, sink port.Sink, opts ...Option) (*Router, error) {
	o := options{clock: clockwork.NewRealClock(), log: slog.Default(), reg: prometheus.NewRegistry(), drainTimeout: 10 * time.Second, queue: 4096, queueBytes: 32 << 20}
	for _, opt := range opts {
		opt(&o)
	}
	if cfg == nil || codec == nil || src == nil || sink == nil {
		return nil, ErrMissingDependency
	}
	r := &Router{
		cfg: cfg, src: src, sink: sink, opts: o,
		events: make(chan any, o.queue), revokes: make(chan revokeReq), reconfigs: make(chan reconfigReq), rewinds: make(chan struct{}, 1),
		feed: make(chan *schemas.FallbackAnswer, 1024), stop: make(chan struct{}), done: make(chan struct{}), closing: make(chan struct{}),
		assigned: map[port.TopicPartition]bool{}, partitions: int32(cfg.Topics.Partitions),
	}
	tx, isTx := sink.(port.TxSink)
	if cfg.Router.Delivery == config.ExactlyOnce && !isTx {
		return nil, ErrNeedTxSink
	}
	m, err := newMetrics(o.reg)
	if err != nil {
		return nil, fmt.Errorf("router: registering metrics: %w", err)
	}
	if err := registerPendingLimit(o.reg, cfg.Router.MaxPending); err != nil {
		return nil, fmt.Errorf("router: registering metrics: %w", err)
	}
	r.m = m
	r.setHealth(ErrNotStarted)
	e, err := newEngine(cfg, codec, m, o.log, o.clock.Now().UnixMilli())
	if err != nil {
		return nil, err
	}
	e.contexts = o.contexts
	e.trace = newIntentTracer(o.tracer)
	e.rnd = rand.Int64N
	if o.rnd != nil {
		e.rnd = o.rnd.Int64N
	}
	views := e.agentViews(o.clock.Now().UnixMilli())
	r.agents.Store(&views)
	e.failed = r.fail
	e.owns = func(p int32) bool { return r.assigned[port.TopicPartition{Topic: cfg.Topics.Requests, Partition: p}] }
	r.engine = e
	if cfg.Router.Delivery == config.ExactlyOnce {
		r.d = newExactlyOnce(r, tx)
	} else {
		r.d = newAtLeastOnce(r)
	}
	e.emit, e.toAgent = r.d.produce, r.d.dispatch
	src.OnRevoke(r.onRevoke)
	return r, nil
}

// Agents returns a snapshot of each configured agent's admission state and
// circuit breaker, by name. The event loop publishes it every agentViewMs, so
// it may be that old. Safe for concurrent use.
func (r *Router) Agents() []AgentView { return slices.Clone(*r.agents.Load()) }

// agentViewMs is how often the event loop publishes the agents' view.
const agentViewMs = 100

// Ready returns nil while the router is running and healthy, else why not.
// It backs /readyz.
func (r *Router) Ready() error { return r.health.Load().err }

// Run routes until ctx ends or Shutdown is called, then stops: it commits (or
// waits, up to the drain timeout, for the broker to acknowledge) what is in
// flight, and closes the Source and the Sink. It returns nil after a clean
// stop, or the fatal error that stopped it. Run may be called once.
func (r *Router) Run(ctx context.Context) error {
	if !r.started.CompareAndSwap(false, true) {
		return ErrAlreadyStarted
	}
	defer close(r.done)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-r.stop:
			cancel()
		case <-ctx.Done():
		}
	}()

	// Shutdown order: the poll goroutine and the fallback feed stop first (no
	// new input), then the loop commits or drains what is in flight, then the
	// Source is closed (it leaves the group), then the Sink.
	var wg sync.WaitGroup
	wg.Add(1)
	pollErr := make(chan error, 1)
	go func() {
		defer wg.Done()
		pollErr <- r.poll(ctx)
	}()
	if r.opts.feed != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.readFallbackFeed(ctx)
		}()
	}
	r.setHealth(nil)
	err := r.loop(ctx, pollErr)
	cancel()
	// The poll goroutine may be waiting in the revoke hook for the loop.
	waitDone := make(chan struct{})
	go func() { wg.Wait(); close(waitDone) }()
	for waiting := true; waiting; {
		select {
		case <-waitDone:
			waiting = false
		case req := <-r.revokes:
			r.revoke(req.tps, req.lost)
			close(req.done)
		}
	}
	r.d.finish()
	r.setHealth(ErrStopped)
	close(r.closing) // closing the Source revokes: nothing is left to commit
	if cerr := r.src.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("router: closing the consumer: %w", cerr)
	}
	if cerr := r.sink.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("router: closing the producer: %w", cerr)
	}
	return err
}

// Shutdown stops Run and waits for it to return or for ctx to end. It is
// safe to call more than once, and before or without Run.
func (r *Router) Shutdown(ctx context.Context) error {
	r.stopOnce.Do(func() { close(r.stop) })
	if !r.started.Load() {
		return nil
	}
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loop is the event loop: the only goroutine that touches the engine.
func (r *Router) loop(ctx context.Context, pollErr <-chan error) error {
	ticker := r.opts.clock.NewTicker(r.cfg.Router.Tick.D())
	defer ticker.Stop()
	commits, stopCommits := r.d.commitTicks()
	defer stopCommits()
	acks := r.sink.Acks() // a TxSink reports its sends at once there
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-pollErr:
			if err != nil {
				r.fail(err)
			}
			return err
		case ev := <-r.events:
			r.handle(ev)
			// Take whatever else is queued before the next select, so a
			// burst costs one wake-up (and, exactly_once, one commit: what
			// queued during the last commit is the next one's batch). Only
			// the loop receives, so len is what it can take without waiting.
			for n := len(r.events); n > 0; n-- {
				r.handle(<-r.events)
			}
		case a := <-acks:
			r.d.ack(a)
			r.d.settle() // a failed dispatch fails the transaction
			// The broker acknowledges a produce request's records
			// together: take the others that arrived with this one, so
			// a burst costs one select (the loop's has nine cases) and
			// one groupCommit rather than one per output.
		burst:
			for n := len(acks); n > 0; n-- {
				select {
				case a := <-acks:
					r.d.ack(a)
					r.d.settle()
				default: // settle took them (it may wait for acknowledgements)
					break burst
				}
			}
		case req := <-r.revokes:
			r.revoke(req.tps, req.lost)
			close(req.done)
		case fa := <-r.feed:
			r.engine.onFallbackAnswer(fa)
		case req := <-r.reconfigs:
			r.reconfigure(req.cfg)
			close(req.done)
		case <-ticker.Chan():
			// Records already polled go first: a response waiting in the
			// queue (say, behind a slow commit) must pair before its
			// intent's timer fires.
			for n := len(r.events); n > 0; n-- {
				r.handle(<-r.events)
			}
			r.onTick()
		case <-commits:
			r.d.commit()
		}
		r.d.groupCommit()
	}
}

func (r *Router) handle(ev any) {
	now := r.opts.clock.Now().UnixMilli()
	switch ev := ev.(type) {
	case *port.Record:
		// Counted as queued while it is handled, until a request's bytes
		// are published as pending: the poll goroutine weighs both against
		// max_pending_bytes and must see the record in one of them.
		queued := recordBytes(ev)
		defer func() { r.queuedBytes.Add(-queued) }()
		if r.d.discarding() {
			return // read before the rewind: it will be read again
		}
		tp := port.TopicPartition{Topic: ev.Topic, Partition: ev.Partition}
		if !r.assigned[tp] {
			// Polled before its partition was revoked (the revoke can
			// overtake records still queued for this loop): the partition's
			// new owner reads it from the committed offset. Handled here,
			// a request would become an intent no one else knows this
			// instance holds, and its timeout a second result.
			r.m.revokedSkipped.Inc()
			return
		}
		t := r.d.begin(tp, ev.Offset)
		switch {
		case r.misrouted(ev):
			r.forward(ev, t)
		case ev.Topic == r.cfg.Topics.Requests:
			r.engine.onRequest(ev, t, now)
			r.pendingBytes.Store(r.engine.budget.total)
			r.queuedBytes.Add(-queued)
			queued = 0
			r.pressure()
		case ev.Topic == r.cfg.Topics.Responses:
			r.engine.onResponse(ev, t, now)
		}
		r.engine.flush(now)
		r.d.handled(t)
		if !ev.PolledAt.IsZero() {
			o := r.m.responseSeconds
			if ev.Topic == r.cfg.Topics.Requests {
				o = r.m.requestSeconds
			}
			o.Observe(r.opts.clock.Since(ev.PolledAt).Seconds())
		}
	case port.EndOfPartition:
		if ev.Topic == r.cfg.Topics.Responses && !r.d.discarding() && r.assigned[port.TopicPartition(ev)] {
			r.engine.readToEnd(ev.Partition, now)
		}
	case *restored:
		r.applyRestore(ev, now)
		r.engine.flush(now)
	}
	r.d.settle()
}

// applyRestore takes over the pending intents the poll goroutine read.
func (r *Router) applyRestore(ev *restored, now int64) {
	r.d.restored(ev)
	total, held := 0, 0
	for _, tp := range ev.tps {
		r.assigned[tp] = true
		if tp.Topic == r.cfg.Topics.Responses {
			r.engine.takingOver(tp.Partition)
		}
		if tp.Topic == r.cfg.Topics.Requests {
			n, h := r.engine.restore(tp.Partition, ev.pending[tp.Partition], now)
			total += n
			held += h
		}
	}
	r.m.restored.Add(float64(total))
	r.m.restoreSeconds.Observe(ev.took.Seconds())
	r.opts.log.Info("partitions taken over", "partitions", len(ev.tps), "pending_restored", total,
		"expired_while_unowned", held, "restore_ms", ev.took.Milliseconds(), "after_abort", ev.rewind)
}

// misrouted reports whether a record sits on another partition than the
// murmur2 hash of its key says (it was produced with another partitioner).
func (r *Router) misrouted(rec *port.Record) bool {
	return len(rec.Key) > 0 && r.partitions > 0 && PartitionFor(rec.Key, r.partitions) != rec.Partition
}

// forward moves a misrouted record to the partition its key hashes to, where
// the instance that owns the intent will read it.
func (r *Router) forward(rec *port.Record, t *track) {
	p := PartitionFor(rec.Key, r.partitions)
	h := append(append([]port.Header(nil), rec.Headers...), port.Header{Key: port.HeaderMovedFrom, Value: []byte(fmt.Sprint(rec.Partition))})
	r.d.produce(&port.Output{Topic: rec.Topic, Partition: &p, Key: rec.Key, Value: rec.Value, Headers: h}, t)
	r.m.moved.WithLabelValues(rec.Topic).Inc()
}

func (r *Router) onTick() {
	now := r.opts.clock.Now().UnixMilli()
	r.engine.tick(now)
	r.engine.flush(now)
	if now-r.viewsAt >= agentViewMs {
		r.viewsAt = now
		views := r.engine.agentViews(now)
		r.agents.Store(&views)
	}
	r.d.tick(now)
	r.m.pending.Set(float64(len(r.engine.pending)))
	r.m.pendingBytes.Set(float64(r.engine.budget.total))
	r.m.fallbackEntries.Set(float64(r.engine.cache.Len()))
	r.d.settle()
	r.pressure()
}

// pressure pauses the requests partitions while the pending table is full
// by count (max_pending), and resumes them below 90% of it: hysteresis. It
// also publishes the pending bytes, which the poll goroutine weighs against
// max_pending_bytes with what is on its way to the loop (byteGate). It runs
// on every tick and after every request, so that a burst is paused at once
// rather than a tick later.
func (r *Router) pressure() {
	r.pendingBytes.Store(r.engine.budget.total)
	n, limit := len(r.engine.pending), r.cfg.Router.MaxPending
	if n >= limit {
		r.backpressure.Store(true)
	} else if n < limit-limit/10 {
		r.backpressure.Store(false)
	}
}

// maxTxBytes bounds an exactly_once transaction by the bytes of its outputs:
// past it the loop commits after the record at hand rather than at the next
// commit interval. Committing flushes every output first, and a transaction
// open longer than transaction.timeout.ms (20 s) is aborted by the broker,
// which fences the producer: with intents of 1 MiB (a dispatch and a
// changelog record each) on a loaded host, a commit interval's worth could
// take that long, and the router fell into abort, redo, abort.
var maxTxBytes int64 = 16 << 20 // a var for tests (export_test.go)

// onRevoke runs in the poll goroutine, inside the Source's rebalance
// handling: it waits until the loop has committed and forgotten the
// partitions, so their next owner starts from this instance's last work.
func (r *Router) onRevoke(tps []port.TopicPartition, lost bool) {
	req := revokeReq{tps: tps, lost: lost, done: make(chan struct{})}
	select {
	case r.revokes <- req:
		<-req.done
	case <-r.closing:
	}
}

func (r *Router) revoke(tps []port.TopicPartition, lost bool) {
	r.d.revoke(tps, lost)
	forgot := 0
	for _, tp := range tps {
		delete(r.assigned, tp)
		if tp.Topic == r.cfg.Topics.Requests {
			forgot += r.engine.forgetPartition(tp.Partition)
		}
	}
	r.opts.log.Info("partitions revoked", "partitions", len(tps), "pending_handed_over", forgot)
}

func (r *Router) fail(err error) {
	r.opts.log.Error("router unhealthy", "error", err)
	r.setHealth(err)
}

func (r *Router) readFallbackFeed(ctx context.Context) {
	err := r.opts.feed(ctx, func(fa *schemas.FallbackAnswer) {
		select {
		case r.feed <- fa:
		case <-ctx.Done():
		}
	})
	if err != nil && ctx.Err() == nil {
		r.opts.log.Warn("reading the fallback-cache topic stopped", "error", err)
	}
}
