package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/router/config"
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

// Router routes intents. Create it with New, start it with Run.
type Router struct {
	cfg    *config.Config
	src    Source
	sink   Sink
	opts   options
	m      *metrics
	engine *engine
	tr     *tracker

	events       chan any    // poll goroutine -> event loop
	backpressure atomic.Bool // event loop -> poll goroutine: pause requests
	inflight     int         // outputs produced and not yet acknowledged (event loop only)
	health       atomic.Pointer[healthState]
	started      atomic.Bool
	stop         chan struct{} // closed by Shutdown
	stopOnce     sync.Once
	done         chan struct{} // closed when Run returns
}

// healthState says why the router is not healthy; err == nil when it is.
type healthState struct{ err error }

func (r *Router) setHealth(err error) { r.health.Store(&healthState{err}) }

// New builds a router over a Source and a Sink. The codec decodes what the
// router reads and encodes what it writes.
func New(cfg *config.Config, codec *schemas.Codec, src Source, sink Sink, opts ...Option) (*Router, error) {
	o := options{clock: clockwork.NewRealClock(), log: slog.Default(), reg: prometheus.NewRegistry(), drainTimeout: 10 * time.Second, queue: 4096}
	for _, opt := range opts {
		opt(&o)
	}
	if cfg == nil || codec == nil || src == nil || sink == nil {
		return nil, ErrMissingDependency
	}
	m, err := newMetrics(o.reg)
	if err != nil {
		return nil, fmt.Errorf("router: registering metrics: %w", err)
	}
	r := &Router{cfg: cfg, src: src, sink: sink, opts: o, m: m, events: make(chan any, o.queue), stop: make(chan struct{}), done: make(chan struct{})}
	r.setHealth(ErrNotStarted)
	e, err := newEngine(cfg, codec, m, o.log, o.clock.Now().UnixMilli())
	if err != nil {
		return nil, err
	}
	r.tr = newTracker(r.storeOffset)
	e.emit = r.produce
	e.release = r.tr.release
	e.failed = r.fail
	r.engine = e
	return r, nil
}

// Ready returns nil while the router is running and healthy, else why not.
// It backs /readyz.
func (r *Router) Ready() error {
	return r.health.Load().err
}

// Run routes until ctx ends or Shutdown is called, then drains: it waits
// (up to the drain timeout) for outputs already produced to be acknowledged,
// stores their offsets, and closes the Source and the Sink. It returns nil
// after a clean stop, or the fatal error that stopped it. Run may be called
// once.
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

	// Shutdown order: the poll goroutine stops first (no new records), then
	// the loop drains acknowledgements, then the Source is closed (it commits
	// the stored offsets and leaves the group), then the Sink.
	var pollWG sync.WaitGroup
	pollWG.Add(1)
	pollErr := make(chan error, 1)
	go func() {
		defer pollWG.Done()
		pollErr <- r.poll(ctx)
	}()
	r.setHealth(nil)
	err := r.loop(ctx, pollErr)
	cancel()
	pollWG.Wait()
	r.drain()
	r.setHealth(ErrStopped)
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
	acks := r.sink.Acks()
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
			// burst costs one wake-up.
			for n := 0; n < 256; n++ {
				select {
				case ev = <-r.events:
					r.handle(ev)
					continue
				default:
				}
				break
			}
		case a := <-acks:
			r.ack(a)
		case <-ticker.Chan():
			r.onTick()
		}
	}
}

func (r *Router) handle(ev any) {
	now := r.opts.clock.Now().UnixMilli()
	switch ev := ev.(type) {
	case *Record:
		t := r.tr.begin(TopicPartition{ev.Topic, ev.Partition}, ev.Offset)
		switch ev.Topic {
		case r.cfg.Topics.Requests:
			r.engine.onRequest(ev, t, now)
		case r.cfg.Topics.Responses:
			r.engine.onResponse(ev, t, now)
		}
		r.tr.release(t)
	case Assigned:
		r.opts.log.Info("partitions assigned", "partitions", fmt.Sprint([]TopicPartition(ev)))
	case Revoked:
		forgot := 0
		for _, tp := range ev {
			r.tr.revoke(tp)
			if tp.Topic == r.cfg.Topics.Requests {
				forgot += r.engine.forgetPartition(tp.Partition)
			}
		}
		r.opts.log.Info("partitions revoked", "partitions", fmt.Sprint([]TopicPartition(ev)), "pending_forgotten", forgot)
	}
}

func (r *Router) onTick() {
	now := r.opts.clock.Now().UnixMilli()
	r.engine.tick(now)
	n := len(r.engine.pending)
	r.m.pending.Set(float64(n))
	r.m.uncommitted.Set(float64(r.tr.lag()))
	r.m.fallbackEntries.Set(float64(r.engine.cache.Len()))
	// Hysteresis: pause at the bound, resume below 90% of it.
	limit := r.cfg.Router.MaxPending
	if n >= limit {
		r.backpressure.Store(true)
	} else if n < limit-limit/10 {
		r.backpressure.Store(false)
	}
}

// delivery is the opaque of one produced output.
type delivery struct {
	a, b *track
	out  *Output
}

func (r *Router) produce(o *Output, a, b *track) {
	a.hold()
	b.hold()
	d := &delivery{a: a, b: b, out: o}
	r.inflight++
	if err := r.sink.Produce(o, d); err != nil {
		r.ack(Ack{Opaque: d, Err: err})
	}
}

func (r *Router) ack(a Ack) {
	d, ok := a.Opaque.(*delivery)
	if !ok {
		return
	}
	r.inflight--
	if a.Err != nil {
		r.m.deliveryFailed.Inc()
		r.tr.fail(d.a)
		r.tr.fail(d.b)
		r.fail(fmt.Errorf("router: delivery to %s failed: %w", d.out.Topic, a.Err))
	}
	r.tr.release(d.a)
	r.tr.release(d.b)
}

// drain waits for outstanding acknowledgements after the loop stopped.
func (r *Router) drain() {
	if r.inflight == 0 {
		return
	}
	deadline := r.opts.clock.After(r.opts.drainTimeout)
	acks := r.sink.Acks()
	for r.inflight > 0 {
		select {
		case a := <-acks:
			r.ack(a)
		case <-deadline:
			r.opts.log.Warn("stopped before the broker acknowledged every output; their records stay uncommitted", "outstanding", r.inflight)
			return
		}
	}
}

func (r *Router) storeOffset(tp TopicPartition, next int64) {
	if err := r.src.StoreOffset(tp, next); err != nil {
		r.opts.log.Debug("storing an offset", "topic", tp.Topic, "partition", tp.Partition, "offset", next, "error", err)
	}
}

func (r *Router) fail(err error) {
	r.opts.log.Error("router unhealthy", "error", err)
	r.setHealth(err)
}

// poll is the poll goroutine. It never blocks on the event loop: when the
// loop's queue is full it keeps a backlog and pauses its partitions until the
// backlog drains, so max.poll.interval.ms never evicts the instance.
func (r *Router) poll(ctx context.Context) error {
	var (
		backlog  []any
		assigned = map[TopicPartition]bool{}
		paused   = map[TopicPartition]bool{}
	)
	for ctx.Err() == nil {
		for len(backlog) > 0 {
			select {
			case r.events <- backlog[0]:
				backlog[0] = nil
				backlog = backlog[1:]
				continue
			default:
			}
			break
		}
		r.applyPause(assigned, paused, len(backlog) > 0, r.backpressure.Load())

		ev := r.src.Poll(100)
		switch e := ev.(type) {
		case nil:
			continue
		case error:
			var fatal *FatalError
			if errors.As(e, &fatal) {
				return e
			}
			r.opts.log.Warn("kafka consumer", "error", e)
			continue
		case Assigned:
			for _, tp := range e {
				assigned[tp] = true
			}
		case Revoked:
			for _, tp := range e {
				delete(assigned, tp)
				delete(paused, tp)
			}
		}
		if len(backlog) == 0 {
			select {
			case r.events <- ev:
				continue
			default:
			}
		}
		backlog = append(backlog, ev)
	}
	return nil
}

// applyPause pauses every assigned partition while the loop is behind, only
// the requests partitions while the pending table is full (responses must keep
// flowing to resolve intents), and resumes the rest.
func (r *Router) applyPause(assigned, paused map[TopicPartition]bool, behind, full bool) {
	var pause, resume []TopicPartition
	for tp := range assigned {
		want := behind || (full && tp.Topic == r.cfg.Topics.Requests)
		if want && !paused[tp] {
			pause = append(pause, tp)
			paused[tp] = true
		} else if !want && paused[tp] {
			resume = append(resume, tp)
			delete(paused, tp)
		}
	}
	if len(pause) > 0 {
		if err := r.src.Pause(pause); err != nil {
			r.opts.log.Warn("pausing partitions", "error", err)
		}
		r.m.paused.Set(1)
	}
	if len(resume) > 0 {
		if err := r.src.Resume(resume); err != nil {
			r.opts.log.Warn("resuming partitions", "error", err)
		}
		if len(paused) == 0 {
			r.m.paused.Set(0)
		}
	}
}
