package contexts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
)

// EventReader reads the events topic an Aggregation aggregates.
type EventReader interface {
	// ReadEvents reads every partition from the first record stamped at or
	// after since and follows it until ctx ends. It calls fn for each record
	// (its value and record timestamp, unix ms) and caughtUp once, when it
	// has read up to where the topic ended when reading began; both from one
	// goroutine. It returns nil when ctx ends, or the error that stopped it
	// (fn's included).
	ReadEvents(ctx context.Context, since time.Time, caughtUp func(), fn func(value []byte, timestampMs int64) error) error
}

// Aggregation runs an Aggregator over an events topic and publishes the
// features through a Publisher: 'switchboard context aggregate'. On start
// it re-reads the events topic from the Aggregator's ReplayFrom (it keeps no
// state of its own), and closes windows only once it has caught up. Windows
// close on the ticks of its clock; every heartbeat it also hands the
// publisher every entity's current features, so unchanged ones stay fresh.
type Aggregation struct {
	cfg       AggregatorConfig
	format    EventFormat
	events    EventReader
	pub       *Publisher
	clock     clockwork.Clock
	tick      time.Duration
	heartbeat time.Duration
	log       *slog.Logger
	reg       prometheus.Registerer
	m         *aggregateMetrics
	read      atomic.Int64
	started   atomic.Bool
}

// AggregationOption configures an Aggregation.
type AggregationOption func(*Aggregation)

// WithAggregationClock sets the clock windows close on (default: real).
func WithAggregationClock(c clockwork.Clock) AggregationOption {
	return func(a *Aggregation) { a.clock = c }
}

// WithTick sets how often windows are closed (default 1s).
func WithTick(d time.Duration) AggregationOption { return func(a *Aggregation) { a.tick = d } }

// WithHeartbeat sets how often every entity's features are handed to the
// publisher even when unchanged (default 5s; the publisher's own heartbeat
// decides whether that produces a snapshot).
func WithHeartbeat(d time.Duration) AggregationOption {
	return func(a *Aggregation) { a.heartbeat = d }
}

// WithAggregationRegisterer sets where the metrics are registered.
func WithAggregationRegisterer(r prometheus.Registerer) AggregationOption {
	return func(a *Aggregation) { a.reg = r }
}

// WithAggregationLogger sets the logger (default slog.Default()).
func WithAggregationLogger(l *slog.Logger) AggregationOption {
	return func(a *Aggregation) { a.log = l }
}

// NewAggregation returns an Aggregation that reads events with format from
// events and publishes through pub.
func NewAggregation(cfg AggregatorConfig, format EventFormat, events EventReader, pub *Publisher, opts ...AggregationOption) (*Aggregation, error) {
	a := &Aggregation{
		cfg: cfg, format: format, events: events, pub: pub, clock: clockwork.NewRealClock(),
		tick: time.Second, heartbeat: 5 * time.Second, log: slog.Default(), reg: prometheus.NewRegistry(),
	}
	for _, opt := range opts {
		opt(a)
	}
	if events == nil || pub == nil || a.clock == nil || a.log == nil || a.reg == nil || a.tick <= 0 {
		return nil, ErrMissingDependency
	}
	if _, err := NewAggregator(cfg, 0); err != nil {
		return nil, err
	}
	m, err := newAggregateMetrics(a.reg)
	if err != nil {
		return nil, err
	}
	a.m = m
	return a, nil
}

// Read returns how many events have been read (decoded or not) since Run
// began.
func (a *Aggregation) Read() int64 { return a.read.Load() }

// item is what the reader goroutine hands the loop: a record, or the news
// that the past has been read.
type item struct {
	value    []byte
	ts       int64
	caughtUp bool
}

// Run aggregates until ctx ends (then it returns nil), or reading or
// publishing fails (then it returns why: run it again, it rebuilds its
// windows). Run may be called once.
func (a *Aggregation) Run(ctx context.Context) error {
	if !a.started.CompareAndSwap(false, true) {
		return ErrAlreadyStarted
	}
	start := a.clock.Now()
	agg, err := NewAggregator(a.cfg, start.UnixMilli())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	items := make(chan item, 1024)
	send := func(it item) error {
		select {
		case items <- it:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	readErr := make(chan error, 1)
	since := time.UnixMilli(agg.ReplayFrom())
	go func() {
		readErr <- a.events.ReadEvents(ctx, since, func() { _ = send(item{caughtUp: true}) },
			func(value []byte, ts int64) error { return send(item{value: value, ts: ts}) })
	}()
	// The reader goroutine ends with ctx, which every return cancels.
	defer func() {
		cancel()
		if err := <-readErr; err != nil {
			a.log.Debug("the events reader stopped", "error", err)
		}
	}()
	a.log.Info("aggregating: rebuilding the open windows", "from", since.UTC().Format(time.RFC3339))
	ticker := a.clock.NewTicker(a.tick)
	defer ticker.Stop()
	caughtUp := false
	lastBeat := start
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-readErr:
			readErr <- err // for the deferred wait
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				err = errors.New("the reader stopped")
			}
			return fmt.Errorf("contexts: reading events: %w", err)
		case it := <-items:
			if !it.caughtUp {
				a.add(agg, it)
				continue
			}
			caughtUp = true
			a.log.Info("aggregating: caught up", "events", a.read.Load(), "entities", agg.Len())
			// Close at once what is due: a tick may have come first.
			if err := a.advance(ctx, agg, &lastBeat); err != nil {
				return err
			}
		case <-ticker.Chan():
			if !caughtUp {
				continue
			}
			if err := a.advance(ctx, agg, &lastBeat); err != nil {
				return err
			}
		}
	}
}

// advance closes the windows due and publishes what changed, and every
// heartbeat every entity's features.
func (a *Aggregation) advance(ctx context.Context, agg *Aggregator, lastBeat *time.Time) error {
	now := a.clock.Now()
	if err := a.publish(ctx, agg.Advance(now.UnixMilli())); err != nil {
		return err
	}
	// The publisher need not remember what it last sent of an entity the
	// aggregator forgot: if it comes back, its seed (the store) knows.
	for _, e := range agg.Dropped() {
		a.pub.Forget(e.Tenant, e.ID)
	}
	if now.Sub(*lastBeat) >= a.heartbeat {
		*lastBeat = now
		if err := a.publish(ctx, agg.Current()); err != nil {
			return err
		}
	}
	a.m.entities.Set(float64(agg.Len()))
	return nil
}

func (a *Aggregation) add(agg *Aggregator, it item) {
	defer a.read.Add(1)
	a.m.lag.Set(max(float64(a.clock.Now().UnixMilli()-it.ts)/1000, 0))
	ev, err := a.format.Decode(it.value, it.ts)
	if err != nil {
		a.m.events.WithLabelValues("invalid").Inc()
		a.log.Debug("event skipped", "error", err)
		return
	}
	if Future(ev) {
		a.m.events.WithLabelValues("future").Inc()
		a.log.Debug("event skipped: stamped after its record beyond the allowed skew", "key", ev.Key, "event_ms", ev.TimeMs, "record_ms", ev.ArrivalMs)
		return
	}
	if agg.Add(ev) > 0 {
		a.m.events.WithLabelValues("late").Inc()
		return
	}
	a.m.events.WithLabelValues("accepted").Inc()
}

func (a *Aggregation) publish(ctx context.Context, updates []Update) error {
	for _, u := range updates {
		if _, err := a.pub.Publish(ctx, u.Tenant, u.ID, u.Features); err != nil {
			return err
		}
	}
	return nil
}

type aggregateMetrics struct {
	events   *prometheus.CounterVec
	lag      prometheus.Gauge
	entities prometheus.Gauge
}

func newAggregateMetrics(reg prometheus.Registerer) (*aggregateMetrics, error) {
	m := &aggregateMetrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_context_aggregate_events_total",
			Help: "Events the aggregator read, by result: accepted, late (too late for at least one window), invalid, future (stamped after its record by more than the allowed skew).",
		}, []string{"result"}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_context_aggregate_lag_seconds",
			Help: "How far behind the aggregator reads: now minus the record timestamp of the last event read.",
		}),
		entities: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_context_aggregate_entities",
			Help: "Entities the aggregator holds windows or features of.",
		}),
	}
	return m, register(reg, m.events, m.lag, m.entities)
}
