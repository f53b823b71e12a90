package config

import (
	"fmt"
	"regexp"
	"sort"
	"time"

	"github.com/switchboard-mcp/switchboard/intents"
)

// Contexts configures per-entity context: how long a snapshot counts as
// fresh, when the delta publisher publishes, and the built-in windowed
// feature engine ('switchboard context aggregate').
type Contexts struct {
	// MaxAge is how old a snapshot may be and still count as fresh, for
	// intent types that set no context_max_age. Default 30s.
	MaxAge Duration `yaml:"max_age"`
	// Publish configures the delta publisher.
	Publish ContextPublish `yaml:"publish"`
	// Aggregate configures 'switchboard context aggregate'; nil when not used.
	Aggregate *ContextAggregate `yaml:"aggregate"`
}

// ContextPublish says when the delta publisher produces a snapshot: when a
// feature changed beyond its threshold, or when Heartbeat passed since the
// entity's last snapshot.
type ContextPublish struct {
	// Heartbeat republishes an unchanged entity this long after its last
	// snapshot, so that it stays fresh. Default 10s (a third of the default
	// max age); zero after defaults is impossible, set it high to disable.
	Heartbeat Duration `yaml:"heartbeat"`
	// Thresholds by feature name. A feature without one publishes on any
	// change. A change counts when it exceeds either threshold that is set.
	Thresholds map[string]*Threshold `yaml:"thresholds"`
}

// Threshold is how much a feature must change for a new snapshot.
type Threshold struct {
	// Absolute: |new - old| > Absolute.
	Absolute float64 `yaml:"absolute"`
	// Relative: |new - old| > Relative * |old|, e.g. 0.05 for 5%.
	Relative float64 `yaml:"relative"`
}

// ContextAggregate is the windowed feature engine: it reads JSON events,
// keys them by KeyField and computes Features over event-time windows.
type ContextAggregate struct {
	// EventsTopic is the topic of JSON events to aggregate (required).
	EventsTopic string `yaml:"events_topic"`
	// KeyField is the event field naming the entity (required); a dotted
	// path reaches into nested objects ("user.id").
	KeyField string `yaml:"key_field"`
	// TenantField is the event field naming the tenant whose entity it is
	// (entities are namespaced by tenant, like intents); empty: Tenant.
	TenantField string `yaml:"tenant_field"`
	// Tenant is the tenant of every event's entity when TenantField is
	// empty; empty: none (the entities intents without a tenant see).
	Tenant string `yaml:"tenant"`
	// TimeField is the event field holding the event time, unix milliseconds
	// or an RFC 3339 string; empty uses the record timestamp.
	TimeField string `yaml:"time_field"`
	// AllowedLateness is how long after a window's end events for it are
	// still counted (judged by the record timestamp, so a restart re-reads
	// the same decision); the window's result is published then. Default 0.
	AllowedLateness Duration `yaml:"allowed_lateness"`
	// Features by name: each is one aggregate over one kind of window.
	Features map[string]*WindowFeature `yaml:"features"`
}

// Aggregate operations.
const (
	OpCount = "count"
	OpSum   = "sum"
	OpAvg   = "avg"
	OpMin   = "min"
	OpMax   = "max"
	OpLast  = "last"
)

// WindowFeature is one feature: Op over Field in windows of Window, starting
// every Hop (tumbling when Hop is zero or equals Window).
type WindowFeature struct {
	Op     string   `yaml:"op"`
	Field  string   `yaml:"field"`
	Window Duration `yaml:"window"`
	Hop    Duration `yaml:"hop"`
}

// Intent-type context modes.
const (
	ContextNone   = ""
	ContextAttach = "attach"
)

// MaxWindowsPerEvent bounds window/hop: every event is counted in that many
// windows of a feature.
const MaxWindowsPerEvent = 1000

// DefaultContextMaxAge is how old a snapshot may be and count as fresh.
const DefaultContextMaxAge = 30 * time.Second

var featureRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,127}$`)

func (c *Config) setContextDefaults() {
	if c.Contexts.MaxAge == 0 {
		c.Contexts.MaxAge = Duration(DefaultContextMaxAge)
	}
	if c.Contexts.Publish.Heartbeat == 0 {
		c.Contexts.Publish.Heartbeat = Duration(10 * time.Second)
	}
	for _, it := range c.Intents {
		if it != nil && it.ContextMaxAge == 0 {
			it.ContextMaxAge = c.Contexts.MaxAge
		}
	}
	if a := c.Contexts.Aggregate; a != nil {
		for _, f := range a.Features {
			if f != nil && f.Hop == 0 {
				f.Hop = f.Window
			}
		}
	}
}

// validateContexts checks the contexts section and the context keys of
// intent types.
func (c *Config) validateContexts(add func(msg string, path ...string)) {
	for _, name := range sortedKeys(c.Intents) {
		switch c.Intents[name].Context {
		case ContextNone, ContextAttach:
		default:
			add(fmt.Sprintf("%q is not a context mode: use attach (or leave it out)", c.Intents[name].Context), "intents", name, "context")
		}
	}
	for _, name := range sortedKeys(c.Contexts.Publish.Thresholds) {
		th := c.Contexts.Publish.Thresholds[name]
		switch {
		case th == nil:
			add("give absolute and/or relative", "contexts", "publish", "thresholds", name)
		case th.Absolute < 0:
			add("must not be negative", "contexts", "publish", "thresholds", name, "absolute")
		case th.Relative < 0:
			add("must not be negative", "contexts", "publish", "thresholds", name, "relative")
		case !finite(th.Absolute):
			add(fmt.Sprintf("%g is not a finite number", th.Absolute), "contexts", "publish", "thresholds", name, "absolute")
		case !finite(th.Relative):
			add(fmt.Sprintf("%g is not a finite number", th.Relative), "contexts", "publish", "thresholds", name, "relative")
		}
	}
	a := c.Contexts.Aggregate
	if a == nil {
		return
	}
	if a.EventsTopic == "" {
		add("required: the topic of JSON events to aggregate", "contexts", "aggregate", "events_topic")
	}
	if a.KeyField == "" {
		add("required: the event field naming the entity, e.g. user_id", "contexts", "aggregate", "key_field")
	}
	if a.TenantField != "" && a.Tenant != "" {
		add("give tenant_field or tenant, not both", "contexts", "aggregate", "tenant")
	} else if a.Tenant != "" && !intents.ValidLabel(a.Tenant) {
		add(fmt.Sprintf("%q is not a tenant: 1 to %d bytes of printable UTF-8 without spaces", a.Tenant, intents.MaxLabelLen), "contexts", "aggregate", "tenant")
	}
	if len(a.Features) == 0 {
		add("no features: add one, e.g. clicks_5m: {op: count, window: 5m}", "contexts", "aggregate", "features")
	}
	for _, name := range sortedKeys(a.Features) {
		f := a.Features[name]
		path := []string{"contexts", "aggregate", "features", name}
		if !featureRE.MatchString(name) {
			add("feature names use letters, digits, '_', '-', '.', starting with a letter or '_'", path...)
		}
		if f == nil {
			add("give op and window", path...)
			continue
		}
		switch f.Op {
		case OpCount:
		case OpSum, OpAvg, OpMin, OpMax, OpLast:
			if f.Field == "" {
				add(fmt.Sprintf("required: %s needs the numeric event field it aggregates", f.Op), append(path, "field")...)
			}
		default:
			add(fmt.Sprintf("%q is not an aggregate: use count, sum, avg, min, max or last", f.Op), append(path, "op")...)
		}
		if f.Window.D() < time.Millisecond {
			add("required: the window's length, at least 1ms, e.g. 5m", append(path, "window")...)
			continue
		}
		if f.Hop > f.Window {
			add(fmt.Sprintf("%s is longer than the window %s: windows would leave gaps", f.Hop, f.Window), append(path, "hop")...)
		} else if f.Hop.D() > 0 && f.Window.D()%f.Hop.D() != 0 {
			add(fmt.Sprintf("the window %s must be a whole number of hops", f.Window), append(path, "hop")...)
		} else if f.Hop.D() > 0 && f.Window.D()/f.Hop.D() > MaxWindowsPerEvent {
			add(fmt.Sprintf("%s windows every %s: an event would count in %d windows, at most %d", f.Window, f.Hop, f.Window.D()/f.Hop.D(), MaxWindowsPerEvent), append(path, "hop")...)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
