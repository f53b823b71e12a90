package contexts

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// Sender produces snapshots to the context-snapshot topic, keyed by
// SnapshotKey(tenant, entity id), and returns once the broker acknowledged
// them.
type Sender interface {
	SendSnapshot(ctx context.Context, snap *schemas.ContextSnapshot) error
}

// Threshold is how much a feature must change for a new snapshot: more than
// Absolute, or more than Relative times its last published value (0.05 is
// 5%). A feature with neither set publishes on any change.
type Threshold struct {
	Absolute float64
	Relative float64
}

// exceeded reports whether old -> v is a change worth publishing.
func (th Threshold) exceeded(old, v float64) bool {
	d := math.Abs(v - old)
	if th.Absolute <= 0 && th.Relative <= 0 {
		return d != 0
	}
	return (th.Absolute > 0 && d > th.Absolute) || (th.Relative > 0 && d > th.Relative*math.Abs(old))
}

// PublisherConfig says when a Publisher produces a snapshot.
type PublisherConfig struct {
	// Heartbeat republishes an entity whose features did not change this
	// long after its last snapshot, so that readers keep finding it fresh.
	// Zero never republishes unchanged features.
	Heartbeat time.Duration
	// Thresholds by feature name.
	Thresholds map[string]Threshold
	// SourceTopic, if set, is written to every snapshot's source_topic.
	SourceTopic string
}

// Publish reasons.
const (
	ReasonFirst      = "first"      // nothing was published for the entity before
	ReasonChanged    = "changed"    // a feature changed beyond its threshold, or was added or removed
	ReasonHeartbeat  = "heartbeat"  // nothing changed, but the heartbeat interval passed
	ReasonSuppressed = "suppressed" // nothing worth a snapshot: none produced
)

// Decision is what Publish did.
type Decision struct {
	// Published is true when a snapshot was produced.
	Published bool
	// Reason is one of the Reason* constants.
	Reason string
	// Changed names the features that changed beyond their thresholds
	// (ReasonChanged).
	Changed []string
	// Snapshot is the snapshot produced, or (suppressed) the last one
	// published, which readers still hold.
	Snapshot *schemas.ContextSnapshot
}

// Publisher is the delta publisher: a context engine hands it every feature
// update and it produces a snapshot only when a feature changed beyond its
// threshold or the heartbeat interval passed. It compares against the last
// snapshot it produced (not the last update), so slow drift is published
// once it adds up.
//
// Versions increase per entity: a snapshot's version is the publish time in
// unix milliseconds, or the previous version plus one if that is not larger
// (two snapshots in one millisecond). They stay increasing across restarts
// as long as the clock does not go back past the last version; a Publisher
// seeded with WithSeed (from a Store that read the topic) continues from the
// versions in the topic whatever the clock says, and suppresses as if it had
// never stopped.
//
// Publish is safe for concurrent use; calls are serialised, each waiting for
// the broker, so that the topic holds every entity's snapshots in version
// order.
type Publisher struct {
	cfg   PublisherConfig
	send  Sender
	clock clockwork.Clock
	seed  func(tenant, entity string) *schemas.ContextSnapshot
	m     *publishMetrics

	mu   sync.Mutex
	last map[string]*schemas.ContextSnapshot // by SnapshotKey
}

// PublisherOption configures a Publisher.
type PublisherOption func(*publisherOptions)

type publisherOptions struct {
	clock clockwork.Clock
	reg   prometheus.Registerer
	seed  func(tenant, entity string) *schemas.ContextSnapshot
}

// WithPublisherClock sets the clock heartbeats, snapshot times and versions
// come from (default: real).
func WithPublisherClock(c clockwork.Clock) PublisherOption {
	return func(o *publisherOptions) { o.clock = c }
}

// WithPublisherRegisterer sets where the publisher registers its metrics.
func WithPublisherRegisterer(r prometheus.Registerer) PublisherOption {
	return func(o *publisherOptions) { o.reg = r }
}

// WithSeed sets where the publisher finds the last snapshot of an entity (of
// a tenant, "" for none) it has not published yet in this process:
// typically a caught-up Store's Get. Without it the first update of every
// entity is published.
func WithSeed(f func(tenant, entity string) *schemas.ContextSnapshot) PublisherOption {
	return func(o *publisherOptions) { o.seed = f }
}

// NewPublisher returns a publisher that produces through send.
func NewPublisher(cfg PublisherConfig, send Sender, opts ...PublisherOption) (*Publisher, error) {
	o := publisherOptions{clock: clockwork.NewRealClock(), reg: prometheus.NewRegistry()}
	for _, opt := range opts {
		opt(&o)
	}
	if send == nil || o.clock == nil || o.reg == nil {
		return nil, ErrMissingDependency
	}
	for name, th := range cfg.Thresholds {
		if th.Absolute < 0 || th.Relative < 0 || math.IsNaN(th.Absolute) || math.IsNaN(th.Relative) {
			return nil, fmt.Errorf("%w: threshold of %s is negative", ErrInvalidEntity, name)
		}
	}
	m, err := newPublishMetrics(o.reg)
	if err != nil {
		return nil, err
	}
	cfg.Thresholds = maps.Clone(cfg.Thresholds)
	return &Publisher{cfg: cfg, send: send, clock: o.clock, seed: o.seed, m: m, last: map[string]*schemas.ContextSnapshot{}}, nil
}

// Publish takes the current features of entity, in tenant's namespace (""
// for none), and produces a snapshot of them if the last one published
// differs beyond a threshold (or has other features), or is at least a
// heartbeat old. It returns what it decided; an error means the snapshot
// could not be produced (the next Publish tries again). features is copied.
// The entity id and the tenant must be what an intent can name: printable,
// without spaces (ErrInvalidEntity otherwise).
func (p *Publisher) Publish(ctx context.Context, tenant, entity string, features map[string]float64) (Decision, error) {
	if err := checkEntity(tenant, entity); err != nil {
		return Decision{}, err
	}
	for name, v := range features {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Decision{}, fmt.Errorf("%w: feature %s of %s is %v, not a finite number", ErrInvalidEntity, name, entity, v)
		}
	}
	key := SnapshotKey(tenant, entity)
	p.mu.Lock()
	defer p.mu.Unlock()
	last, known := p.last[key]
	if !known && p.seed != nil {
		last = p.seed(tenant, entity)
	}
	now := p.clock.Now().UnixMilli()
	d := p.decide(last, features, now)
	if !d.Published {
		if !known && last != nil {
			p.last[key] = last
		}
		d.Snapshot = last
		p.m.count(false)
		return d, nil
	}
	snap := &schemas.ContextSnapshot{EntityID: entity, SnapshotTs: now, Version: now, Features: maps.Clone(features)}
	if snap.Features == nil {
		snap.Features = map[string]float64{}
	}
	if last != nil && last.Version >= snap.Version {
		snap.Version = last.Version + 1
	}
	if p.cfg.SourceTopic != "" {
		snap.SourceTopic = &p.cfg.SourceTopic
	}
	if tenant != "" {
		snap.Tenant = &tenant
	}
	if err := p.send.SendSnapshot(ctx, snap); err != nil {
		return Decision{}, fmt.Errorf("contexts: publishing the snapshot of %s: %w", entity, err)
	}
	p.last[key] = snap
	p.m.count(true)
	d.Snapshot = snap
	return d, nil
}

// Forget drops what the publisher remembers of entity (of tenant, "" for
// none): its next Publish compares with its seed (WithSeed), or is published
// as the first. A context engine calls it for an entity it no longer holds,
// so the publisher's memory stays bounded by the engine's.
func (p *Publisher) Forget(tenant, entity string) {
	p.mu.Lock()
	delete(p.last, SnapshotKey(tenant, entity))
	p.mu.Unlock()
}

// Len returns how many entities the publisher remembers the last snapshot of.
func (p *Publisher) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.last)
}

// decide compares features with the last published snapshot.
func (p *Publisher) decide(last *schemas.ContextSnapshot, features map[string]float64, nowMs int64) Decision {
	if last == nil {
		return Decision{Published: true, Reason: ReasonFirst}
	}
	var changed []string
	for name, v := range features {
		old, ok := last.Features[name]
		if !ok || p.cfg.Thresholds[name].exceeded(old, v) {
			changed = append(changed, name)
		}
	}
	for name := range last.Features {
		if _, ok := features[name]; !ok {
			changed = append(changed, name)
		}
	}
	if len(changed) > 0 {
		slices.Sort(changed)
		return Decision{Published: true, Reason: ReasonChanged, Changed: changed}
	}
	if p.cfg.Heartbeat > 0 && nowMs-last.SnapshotTs >= p.cfg.Heartbeat.Milliseconds() {
		return Decision{Published: true, Reason: ReasonHeartbeat}
	}
	return Decision{Reason: ReasonSuppressed}
}

type publishMetrics struct {
	total *prometheus.CounterVec
	ratio prometheus.Gauge

	mu                    sync.Mutex
	published, suppressed float64
}

func newPublishMetrics(reg prometheus.Registerer) (*publishMetrics, error) {
	m := &publishMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_context_publish_total",
			Help: "Feature updates handed to the delta publisher, by result: published (a snapshot was produced) or suppressed.",
		}, []string{"result"}),
		ratio: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_context_publish_suppression_ratio",
			Help: "Fraction of the feature updates handed to the delta publisher that produced no snapshot, since start.",
		}),
	}
	return m, register(reg, m.total, m.ratio)
}

func (m *publishMetrics) count(published bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if published {
		m.published++
		m.total.WithLabelValues("published").Inc()
	} else {
		m.suppressed++
		m.total.WithLabelValues("suppressed").Inc()
	}
	m.ratio.Set(m.suppressed / (m.published + m.suppressed))
}
