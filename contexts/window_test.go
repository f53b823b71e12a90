package contexts_test

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/contexts"
)

// b is the tests' time origin, a multiple of every window; at(s) is b plus s
// seconds, in unix ms.
var b = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func at(s float64) int64 { return b.Add(time.Duration(s * float64(time.Second))).UnixMilli() }

func newAggregator(t *testing.T, cfg contexts.AggregatorConfig, startMs int64) *contexts.Aggregator {
	t.Helper()
	a, err := contexts.NewAggregator(cfg, startMs)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func byKey(us []contexts.Update) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for _, u := range us {
		out[u.ID] = u.Features
	}
	return out
}

func amount(v float64) map[string]float64 { return map[string]float64{"amount": v} }

// Tumbling 5-minute windows with one minute of allowed lateness, every
// aggregate, against results worked out by hand.
func TestAggregatorTumblingWithLateAndOutOfOrderEvents(t *testing.T) {
	five := 5 * time.Minute
	a := newAggregator(t, contexts.AggregatorConfig{
		AllowedLateness: time.Minute,
		Features: []contexts.WindowFeature{
			{Name: "n", Op: contexts.OpCount, Window: five},
			{Name: "sum", Op: contexts.OpSum, Field: "amount", Window: five},
			{Name: "avg", Op: contexts.OpAvg, Field: "amount", Window: five},
			{Name: "min", Op: contexts.OpMin, Field: "amount", Window: five},
			{Name: "max", Op: contexts.OpMax, Field: "amount", Window: five},
			{Name: "last", Op: contexts.OpLast, Field: "amount", Window: five},
		},
	}, at(0))
	add := func(key string, ts, arrival, v float64, wantLate bool) {
		t.Helper()
		if late := a.Add(contexts.Event{Key: key, TimeMs: at(ts), ArrivalMs: at(arrival), Values: amount(v)}); (late > 0) != wantLate {
			t.Fatalf("event %s@%vs arriving %vs: late for %d windows, want late %v", key, ts, arrival, late, wantLate)
		}
	}
	add("u1", 10, 11, 10, false)
	add("u1", 70, 71, 5, false)
	add("u1", 30, 80, 20, false) // out of order, in time
	add("u2", 290, 295, 1, false)
	add("u1", 299, 350, 7, false)                                         // after the window's end, within the lateness
	add("u1", 310, 311, 100, false)                                       // the next window
	a.Add(contexts.Event{Key: "u1", TimeMs: at(320), ArrivalMs: at(321)}) // no amount: counted only
	if us := a.Advance(at(359)); len(us) != 0 {
		t.Fatalf("a window closed before its end plus the lateness: %v", us)
	}
	add("u1", 200, 360, 1000, true) // arrived at the end plus the lateness: too late
	got := byKey(a.Advance(at(360)))
	want := map[string]map[string]float64{
		"u1": {"n": 4, "sum": 42, "avg": 10.5, "min": 5, "max": 20, "last": 7},
		"u2": {"n": 1, "sum": 1, "avg": 1, "min": 1, "max": 1, "last": 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("first window:\n got %v\nwant %v", got, want)
	}
	add("u1", 250, 361, 1, true) // its window is closed
	got = byKey(a.Advance(at(660)))
	want = map[string]map[string]float64{
		"u1": {"n": 2, "sum": 100, "avg": 100, "min": 100, "max": 100, "last": 100},
		"u2": {"n": 0, "sum": 0}, // an empty window: zero counts, no average
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("second window:\n got %v\nwant %v", got, want)
	}
	if a.Len() != 1 {
		t.Fatalf("u2 (nothing but zeros) is still held: %d entities", a.Len())
	}
	if got := byKey(a.Advance(at(960))); !reflect.DeepEqual(got, map[string]map[string]float64{"u1": {"n": 0, "sum": 0}}) {
		t.Fatalf("third window: %v", got)
	}
	if got := a.Advance(at(1260)); len(got) != 0 || a.Len() != 0 {
		t.Fatalf("after everything closed: %v, %d entities", got, a.Len())
	}
}

// Ten-minute windows every five minutes: an event counts in two windows.
func TestAggregatorHoppingWindows(t *testing.T) {
	a := newAggregator(t, contexts.AggregatorConfig{Features: []contexts.WindowFeature{
		{Name: "n", Op: contexts.OpCount, Window: 10 * time.Minute, Hop: 5 * time.Minute},
		{Name: "max", Op: contexts.OpMax, Field: "amount", Window: 10 * time.Minute, Hop: 5 * time.Minute},
	}}, at(0))
	for _, e := range []struct{ ts, v float64 }{{60, 3}, {400, 8}, {700, 1}} {
		a.Add(contexts.Event{Key: "u", TimeMs: at(e.ts), ArrivalMs: at(e.ts), Values: amount(e.v)})
	}
	for _, step := range []struct {
		now  float64
		want map[string]float64
	}{
		{300, map[string]float64{"n": 1, "max": 3}},  // [-5m, 5m)
		{600, map[string]float64{"n": 2, "max": 8}},  // [0, 10m)
		{900, map[string]float64{"n": 2, "max": 8}},  // [5m, 15m): unchanged, no update
		{1200, map[string]float64{"n": 1, "max": 1}}, // [10m, 20m)
		{1500, map[string]float64{"n": 0}},           // [15m, 25m)
	} {
		us := byKey(a.Advance(at(step.now)))
		if step.now == 900 {
			if len(us) != 0 {
				t.Fatalf("at %vs: %v, want no update", step.now, us)
			}
			continue
		}
		if !reflect.DeepEqual(us["u"], step.want) {
			t.Fatalf("at %vs: %v, want %v", step.now, us["u"], step.want)
		}
	}
}

// event is one record of a simulated events topic.
type event struct {
	key            string
	ts, arrival, v float64
}

// stream is a day's worth of events of a few entities, in arrival order,
// some out of order, some too late.
func stream() []event {
	var out []event
	for i := range 400 {
		arrival := float64(i * 5)
		key := fmt.Sprintf("u%d", i%7)
		ts := arrival - float64((i*37)%90) // up to 90s out of order
		out = append(out, event{key, ts, arrival, float64(i % 13)})
	}
	return out
}

var restartConfig = contexts.AggregatorConfig{
	AllowedLateness: time.Minute,
	Features: []contexts.WindowFeature{
		{Name: "clicks_5m", Op: contexts.OpCount, Window: 5 * time.Minute},
		{Name: "spend_10m", Op: contexts.OpSum, Field: "amount", Window: 10 * time.Minute, Hop: 2 * time.Minute},
		{Name: "avg_10m", Op: contexts.OpAvg, Field: "amount", Window: 10 * time.Minute, Hop: 5 * time.Minute},
		{Name: "last_5m", Op: contexts.OpLast, Field: "amount", Window: 5 * time.Minute},
	},
}

// run drives an aggregator from start to end (seconds) in 10s steps over
// the events that had arrived, applies its updates to published (the
// snapshot topic as readers see it), and calls observe after each step.
// Before the first step, a restarted aggregator replays the events written
// since ReplayFrom.
func run(t *testing.T, events []event, start, end float64, published map[string]map[string]float64, observe func(now float64)) {
	t.Helper()
	a := newAggregator(t, restartConfig, at(start))
	next := 0
	for next < len(events) && at(events[next].arrival) < a.ReplayFrom() {
		next++
	}
	for now := start; now <= end; now += 10 {
		for ; next < len(events) && events[next].arrival <= now; next++ {
			e := events[next]
			a.Add(contexts.Event{Key: e.key, TimeMs: at(e.ts), ArrivalMs: at(e.arrival), Values: amount(e.v)})
		}
		for _, u := range a.Advance(at(now)) {
			published[u.ID] = u.Features
		}
		observe(now)
	}
}

func describe(published map[string]map[string]float64) string {
	var out string
	for _, k := range slices.Sorted(maps.Keys(published)) {
		out += fmt.Sprintf("%s=%v ", k, published[k])
	}
	return out
}

// A restart in the middle of windows, replaying only the window span of the
// events, publishes the same features as an uninterrupted run, at every
// step after the restart.
func TestAggregatorRestartMidWindowMatchesAnUninterruptedRun(t *testing.T) {
	events := stream()
	whole := map[string]map[string]float64{}
	seen := map[float64]string{}
	changes := 0
	run(t, events, 0, 2400, whole, func(now float64) {
		seen[now] = describe(whole)
		if now > 0 && seen[now] != seen[now-10] {
			changes++
		}
	})
	if len(whole) != 7 || changes < 20 {
		t.Fatalf("the uninterrupted run published %d entities, changing %d times", len(whole), changes)
	}
	for _, restartAt := range []float64{450, 460, 1230, 1800} {
		t.Run(fmt.Sprint(restartAt), func(t *testing.T) {
			restarted := map[string]map[string]float64{}
			run(t, events, 0, restartAt-10, restarted, func(float64) {})
			run(t, events, restartAt, 2400, restarted, func(now float64) {
				if got := describe(restarted); got != seen[now] {
					t.Fatalf("at %vs:\nuninterrupted %s\nrestarted     %s", now, seen[now], got)
				}
			})
		})
	}
}

func TestAggregatorConfigErrors(t *testing.T) {
	for _, cfg := range []contexts.AggregatorConfig{
		{},
		{Features: []contexts.WindowFeature{{Name: "x", Op: contexts.OpCount}}},
		{Features: []contexts.WindowFeature{{Name: "x", Op: contexts.OpSum, Window: time.Minute}}},
		{Features: []contexts.WindowFeature{{Name: "x", Op: "median", Field: "f", Window: time.Minute}}},
		{Features: []contexts.WindowFeature{{Name: "x", Op: contexts.OpCount, Window: time.Minute, Hop: 25 * time.Second}}},
	} {
		if _, err := contexts.NewAggregator(cfg, 0); !errors.Is(err, contexts.ErrInvalidAggregate) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

func TestEventFormat(t *testing.T) {
	f := contexts.EventFormat{KeyField: "user.id", TimeField: "ts", Fields: []string{"amount", "missing"}}
	ev, err := f.Decode([]byte(`{"user":{"id":42},"ts":"2026-12-01T12:00:01Z","amount":12.5}`), 99)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Key != "42" || ev.TimeMs != at(1) || ev.ArrivalMs != 99 || !maps.Equal(ev.Values, amount(12.5)) {
		t.Fatalf("decoded %+v", ev)
	}
	ev, err = f.Decode([]byte(`{"user":{"id":"u-1"},"ts":1796126400000,"amount":"a lot"}`), 99)
	if err != nil || ev.Key != "u-1" || ev.TimeMs != 1796126400000 || len(ev.Values) != 0 {
		t.Fatalf("decoded %+v, %v", ev, err)
	}
	noTime := contexts.EventFormat{KeyField: "k"}
	if ev, err := noTime.Decode([]byte(`{"k":"a"}`), 77); err != nil || ev.TimeMs != 77 {
		t.Fatalf("record time: %+v %v", ev, err)
	}
	for _, bad := range []string{`[1]`, `{"user":{}}`, `{"user":{"id":"x"}}`, `{"user":{"id":"x"},"ts":"yesterday"}`, `{"user":{"id":"x"},"ts":1.5}`} {
		if _, err := f.Decode([]byte(bad), 0); !errors.Is(err, contexts.ErrInvalidAggregate) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// TestAggregatorSkipsEventsFromTheFuture: an event stamped far after its
// record would open a window that closes only when the clock reaches it; it
// is not counted, while one within the allowed skew is.
func TestAggregatorSkipsEventsFromTheFuture(t *testing.T) {
	a := newAggregator(t, contexts.AggregatorConfig{Features: []contexts.WindowFeature{{Name: "n", Op: contexts.OpCount, Window: time.Minute}}}, at(0))
	future := contexts.Event{Key: "u1", TimeMs: at(86400 * 365), ArrivalMs: at(10)}
	a.Add(future)
	if n := a.Len(); n != 0 {
		t.Fatalf("an event from the future holds %d entities", n)
	}
	if !contexts.Future(future) {
		t.Fatal("a year ahead is not the future")
	}
	skewed := contexts.Event{Key: "u2", TimeMs: at(10) + contexts.FutureSkew.Milliseconds(), ArrivalMs: at(10)}
	if contexts.Future(skewed) {
		t.Fatal("an event within the skew is from the future")
	}
	a.Add(skewed)
	if got := byKey(a.Advance(at(60))); fmt.Sprint(got) != "map[u2:map[n:1]]" {
		t.Fatalf("updates %v", got)
	}
}

// Events carry their entity's tenant, from a field or fixed; the aggregator
// keeps tenants' entities of one id apart.
func TestEventTenants(t *testing.T) {
	f := contexts.EventFormat{KeyField: "user", TenantField: "org"}
	ev, err := f.Decode([]byte(`{"user":"u-1","org":"acme"}`), 5)
	if err != nil || ev.Tenant != "acme" || ev.Key != "u-1" {
		t.Fatalf("decoded %+v, %v", ev, err)
	}
	for _, bad := range []string{`{"user":"u-1"}`, `{"user":"u-1","org":"a b"}`, `{"user":"u 1","org":"acme"}`, "{\"user\":\"u-\xff\",\"org\":\"acme\"}", `{"user":"u-\ud800","org":"acme"}`} {
		if _, err := f.Decode([]byte(bad), 5); !errors.Is(err, contexts.ErrInvalidAggregate) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	fixed := contexts.EventFormat{KeyField: "user", Tenant: "globex"}
	if ev, err := fixed.Decode([]byte(`{"user":"u-1"}`), 5); err != nil || ev.Tenant != "globex" {
		t.Fatalf("fixed tenant: %+v, %v", ev, err)
	}

	a, err := contexts.NewAggregator(contexts.AggregatorConfig{Features: []contexts.WindowFeature{{Name: "n", Op: contexts.OpCount, Window: time.Minute}}}, at(0))
	if err != nil {
		t.Fatal(err)
	}
	a.Add(contexts.Event{Tenant: "acme", Key: "u-1", TimeMs: at(1), ArrivalMs: at(1)})
	a.Add(contexts.Event{Tenant: "acme", Key: "u-1", TimeMs: at(2), ArrivalMs: at(2)})
	a.Add(contexts.Event{Tenant: "globex", Key: "u-1", TimeMs: at(3), ArrivalMs: at(3)})
	got := map[contexts.Entity]float64{}
	for _, u := range a.Advance(at(61)) {
		got[u.Entity] = u.Features["n"]
	}
	want := map[contexts.Entity]float64{{Tenant: "acme", ID: "u-1"}: 2, {Tenant: "globex", ID: "u-1"}: 1}
	if !maps.Equal(got, want) {
		t.Fatalf("features %v, want %v", got, want)
	}
}
