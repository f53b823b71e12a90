package contexts

import (
	"fmt"
	"maps"
	"math"
	"time"
)

// Aggregate operations over a window.
const (
	OpCount = "count"
	OpSum   = "sum"
	OpAvg   = "avg"
	OpMin   = "min"
	OpMax   = "max"
	OpLast  = "last"
)

// WindowFeature is one feature the Aggregator computes: Op over the numeric
// event field Field (not used by count) in windows of length Window that
// start every Hop (Hop zero or equal to Window: tumbling windows). Windows
// are aligned to the unix epoch: a 5m window starts at :00, :05, ...
type WindowFeature struct {
	Name   string
	Op     string
	Field  string
	Window time.Duration
	Hop    time.Duration
}

// AggregatorConfig is what an Aggregator computes.
type AggregatorConfig struct {
	Features []WindowFeature
	// AllowedLateness: an event counts for a window if its record was
	// written (record timestamp) before the window's end plus this; the
	// window's result is final, and published, once the clock passes it.
	AllowedLateness time.Duration
}

// Entity names an entity: its id in its tenant's namespace (Tenant "" for
// none).
type Entity struct {
	Tenant, ID string
}

// Event is one event, decoded. Its entity is (Tenant, Key).
type Event struct {
	Tenant string
	Key    string
	// TimeMs is the event time, ArrivalMs the record timestamp (unix ms).
	TimeMs, ArrivalMs int64
	// Values holds the numeric fields the features read, by field name.
	Values map[string]float64
}

// Update is the features of one entity after windows closed.
type Update struct {
	Entity
	Features map[string]float64
}

// Aggregator computes windowed features per key, in event time. It is pure:
// events go in with Add, time with Advance, and nothing else moves it, so a
// test (or a restart replaying the same events) gets the same results. It is
// not safe for concurrent use.
//
// An entity's features are the results of its newest closed window of each
// feature. A window that closes with no event for an entity that had a value
// sets count and sum to 0 and removes avg, min, max and last; an entity left
// with nothing but zeros and no open window is forgotten after that update.
//
// Restart: an Aggregator created at startMs treats the windows that closed
// before the newest one closed at startMs as done, and rebuilds the others
// from the events whose records were written since ReplayFrom(): a caller
// re-reads the events topic from there (seeking by timestamp) and then
// advances. Windows that closed while nothing ran, except that newest one,
// are not published. Events stamped later than their record are assumed not
// to exist (event time <= record time); those stamped more than FutureSkew
// later are skipped (see Future), since their windows would stay open, and
// hold memory, until the clock reached them.
type Aggregator struct {
	features   []feature
	lateness   int64
	closedUpTo []int64 // per feature: the end of the newest window done
	keys       map[Entity]*keyState
	dropped    []Entity // entities forgotten since the last Dropped
}

type feature struct {
	WindowFeature
	size, hop int64 // ms
}

type keyState struct {
	open   []map[int64]*accumulator // per feature: window start -> accumulator
	values map[string]float64
}

type accumulator struct {
	count, sum, min, max, last float64
	lastTs                     int64
}

func (a *accumulator) add(v float64, ts int64) {
	if a.count == 0 {
		a.min, a.max = v, v
	}
	a.count++
	a.sum += v
	a.min, a.max = math.Min(a.min, v), math.Max(a.max, v)
	if a.count == 1 || ts >= a.lastTs {
		a.last, a.lastTs = v, ts
	}
}

func (a *accumulator) result(op string) float64 {
	switch op {
	case OpCount:
		return a.count
	case OpSum:
		return a.sum
	case OpAvg:
		return a.sum / a.count
	case OpMin:
		return a.min
	case OpMax:
		return a.max
	}
	return a.last
}

// NewAggregator returns an Aggregator starting at startMs (unix ms).
func NewAggregator(cfg AggregatorConfig, startMs int64) (*Aggregator, error) {
	if len(cfg.Features) == 0 {
		return nil, fmt.Errorf("%w: no features", ErrInvalidAggregate)
	}
	a := &Aggregator{lateness: cfg.AllowedLateness.Milliseconds(), keys: map[Entity]*keyState{}}
	for _, wf := range cfg.Features {
		f := feature{WindowFeature: wf, size: wf.Window.Milliseconds(), hop: wf.Hop.Milliseconds()}
		if f.hop == 0 {
			f.hop = f.size
		}
		switch {
		case f.size <= 0 || f.hop <= 0 || f.hop > f.size || f.size%f.hop != 0:
			return nil, fmt.Errorf("%w: feature %s: window %s and hop %s (the window must be a whole number of hops)", ErrInvalidAggregate, wf.Name, wf.Window, wf.Hop)
		case wf.Op != OpCount && wf.Field == "":
			return nil, fmt.Errorf("%w: feature %s: %s needs a field", ErrInvalidAggregate, wf.Name, wf.Op)
		}
		switch wf.Op {
		case OpCount, OpSum, OpAvg, OpMin, OpMax, OpLast:
		default:
			return nil, fmt.Errorf("%w: feature %s: unknown op %q", ErrInvalidAggregate, wf.Name, wf.Op)
		}
		a.features = append(a.features, f)
		// The newest window closed at startMs is rebuilt and published
		// again; older ones are done.
		a.closedUpTo = append(a.closedUpTo, f.newestClosedEnd(startMs-a.lateness)-f.hop)
	}
	return a, nil
}

// newestClosedEnd is the end of the newest window ending at or before ms.
func (f feature) newestClosedEnd(ms int64) int64 {
	return floorDiv(ms-f.size, f.hop)*f.hop + f.size
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// ReplayFrom is the record timestamp (unix ms) from which the events topic
// must be read to rebuild every window not done yet.
func (a *Aggregator) ReplayFrom() int64 {
	from := int64(math.MaxInt64)
	for i, f := range a.features {
		from = min(from, a.closedUpTo[i]+f.hop-f.size)
	}
	return from
}

// FutureSkew is how much later than its record an event may be stamped (the
// clocks of its producer and of the broker may differ); an event stamped
// further ahead is not counted.
const FutureSkew = 5 * time.Second

// Future reports whether ev is stamped more than FutureSkew after its record:
// Add skips it.
func Future(ev Event) bool { return ev.TimeMs > ev.ArrivalMs+FutureSkew.Milliseconds() }

// Add counts ev in every window of every feature it falls in and may still
// count for. It returns how many windows it was too late for (their end
// plus the allowed lateness had passed when its record was written, or they
// are closed already). An event from the future (see Future) counts nowhere.
func (a *Aggregator) Add(ev Event) (late int) {
	if Future(ev) {
		return 0
	}
	entity := Entity{Tenant: ev.Tenant, ID: ev.Key}
	ks := a.keys[entity]
	for i, f := range a.features {
		v := 1.0
		if f.Op != OpCount {
			var ok bool
			if v, ok = ev.Values[f.Field]; !ok {
				continue
			}
		}
		for s := floorDiv(ev.TimeMs, f.hop) * f.hop; s > ev.TimeMs-f.size; s -= f.hop {
			end := s + f.size
			if end <= a.closedUpTo[i] || ev.ArrivalMs >= end+a.lateness {
				late++
				continue
			}
			if ks == nil {
				ks = &keyState{open: make([]map[int64]*accumulator, len(a.features)), values: map[string]float64{}}
				a.keys[entity] = ks
			}
			if ks.open[i] == nil {
				ks.open[i] = map[int64]*accumulator{}
			}
			acc := ks.open[i][s]
			if acc == nil {
				acc = &accumulator{}
				ks.open[i][s] = acc
			}
			acc.add(v, ev.TimeMs)
		}
	}
	return late
}

// Advance closes every window whose end plus the allowed lateness is at or
// before nowMs, and returns the entities whose features changed, with all
// their features.
func (a *Aggregator) Advance(nowMs int64) []Update {
	changed := map[Entity]bool{}
	for i, f := range a.features {
		end := f.newestClosedEnd(nowMs - a.lateness)
		if end <= a.closedUpTo[i] {
			continue
		}
		for key, ks := range a.keys {
			var newest *accumulator
			for s, acc := range ks.open[i] {
				if s+f.size > end {
					continue
				}
				if s+f.size == end {
					newest = acc
				}
				delete(ks.open[i], s)
			}
			old, had := ks.values[f.Name]
			switch {
			case newest != nil:
				ks.values[f.Name] = newest.result(f.Op)
			case had && (f.Op == OpCount || f.Op == OpSum):
				ks.values[f.Name] = 0
			default:
				delete(ks.values, f.Name)
			}
			if v, has := ks.values[f.Name]; has != had || v != old {
				changed[key] = true
			}
		}
		a.closedUpTo[i] = end
	}
	var out []Update
	for key := range changed {
		ks := a.keys[key]
		out = append(out, Update{Entity: key, Features: maps.Clone(ks.values)})
	}
	for key, ks := range a.keys {
		if ks.idle() {
			delete(a.keys, key)
			a.dropped = append(a.dropped, key)
		}
	}
	return out
}

// Dropped returns the entities the Aggregator forgot (see Advance) since the
// last call.
func (a *Aggregator) Dropped() []Entity {
	d := a.dropped
	a.dropped = nil
	return d
}

// Current returns the features of every entity the Aggregator holds.
func (a *Aggregator) Current() []Update {
	out := make([]Update, 0, len(a.keys))
	for key, ks := range a.keys {
		if len(ks.values) > 0 {
			out = append(out, Update{Entity: key, Features: maps.Clone(ks.values)})
		}
	}
	return out
}

// Len returns how many entities the Aggregator holds.
func (a *Aggregator) Len() int { return len(a.keys) }

// idle: no open window and nothing but zeros.
func (ks *keyState) idle() bool {
	for _, open := range ks.open {
		if len(open) > 0 {
			return false
		}
	}
	for _, v := range ks.values {
		if v != 0 {
			return false
		}
	}
	return true
}
