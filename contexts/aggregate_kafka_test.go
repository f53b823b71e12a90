package contexts_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/switchboard-mcp/switchboard/contexts"
	"github.com/switchboard-mcp/switchboard/router/embedded"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/schemas"
)

func TestAggregationRestartOverTheEmbeddedBroker(t *testing.T) {
	cluster, err := embedded.Start(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	testAggregationRestartOverKafka(t, cluster.Bootstrap())
}

var kafkaAggregate = contexts.AggregatorConfig{
	AllowedLateness: 30 * time.Second,
	Features: []contexts.WindowFeature{
		{Name: "clicks_5m", Op: contexts.OpCount, Window: 5 * time.Minute},
		{Name: "paid_10m", Op: contexts.OpSum, Field: "amount", Window: 10 * time.Minute, Hop: 5 * time.Minute},
		{Name: "max_5m", Op: contexts.OpMax, Field: "amount", Window: 5 * time.Minute},
	},
}

var kafkaFormat = contexts.EventFormat{KeyField: "user", TimeField: "ts", Fields: []string{"amount"}}

// testAggregationRestartOverKafka aggregates one events topic twice, each
// run publishing to its own snapshot topic: once without interruption, once
// stopped in the middle of a window and started again. Both must publish the
// features a pure Aggregator driven through the same steps computes.
func testAggregationRestartOverKafka(t *testing.T, bootstrap string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := kafkaio.Settings{Bootstrap: bootstrap}
	prefix := "cx." + randomHex()
	events, whole, restarted := prefix+".events", prefix+".snap.whole", prefix+".snap.restarted"
	compact := map[string]string{"cleanup.policy": "compact"}
	if _, err := kafkaio.CreateTopics(ctx, s, []kafkaio.TopicSpec{
		{Name: events, Partitions: 3, ReplicationFactor: 1},
		{Name: whole, Partitions: 3, ReplicationFactor: 1, Config: compact},
		{Name: restarted, Partitions: 3, ReplicationFactor: 1, Config: compact},
	}); err != nil {
		t.Fatal(err)
	}
	// 25 minutes of events, by record time: phase one before the restart,
	// phase two after it. Up to 40s out of order (some too late).
	origin := time.Now().Truncate(10 * time.Minute).Add(-50 * time.Minute)
	ms := func(d time.Duration) int64 { return origin.Add(d).UnixMilli() }
	restartAt, checkAt, endAt := 17*time.Minute+30*time.Second, 21*time.Minute, 40*time.Minute
	var phase1, phase2 []logRecord
	for i := range 300 {
		arrival := time.Duration(i) * 5 * time.Second
		ts := ms(arrival) - int64((i*7919)%40_000)
		r := logRecord{fmt.Sprintf(`{"user":"u%d","ts":%d,"amount":%d}`, i%5, ts, i%17), ms(arrival)}
		if arrival < restartAt {
			phase1 = append(phase1, r)
		} else {
			phase2 = append(phase2, r)
		}
	}
	p, err := kafkaio.NewProducer(s)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(5 * time.Second)
	produce := func(rs []logRecord) {
		for _, r := range rs {
			if err := p.Send(ctx, events, nil, []byte(r.value), nil, time.UnixMilli(r.ts)); err != nil {
				t.Fatal(err)
			}
		}
	}

	// What a pure Aggregator publishes through the same steps.
	expect := func(upTo time.Duration) map[string]map[string]float64 {
		a, err := contexts.NewAggregator(kafkaAggregate, ms(0))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]map[string]float64{}
		for _, r := range append(append([]logRecord(nil), phase1...), phase2...) {
			if r.ts < a.ReplayFrom() {
				continue
			}
			ev, _ := kafkaFormat.Decode([]byte(r.value), r.ts)
			a.Add(ev)
		}
		for _, step := range []time.Duration{restartAt, checkAt, endAt} {
			if step > upTo {
				break
			}
			for _, u := range a.Advance(ms(step)) {
				out[u.ID] = u.Features
			}
		}
		return out
	}

	produce(phase1)
	clock := clockwork.NewFakeClockAt(origin)
	runWhole := startAggregation(ctx, t, s, events, whole, clock, origin)
	runWhole.step(t, clock, restartAt, len(phase1))
	produce(phase2)
	runWhole.step(t, clock, checkAt, len(phase1)+len(phase2))
	wantAt(ctx, t, s, whole, expect(checkAt), "uninterrupted, after the restart point")

	// The same, stopped mid-window and started again.
	clock2 := clockwork.NewFakeClockAt(origin)
	first := startAggregation(ctx, t, s, events, restarted, clock2, origin)
	first.step(t, clock2, restartAt, len(phase1)+len(phase2))
	wantAt(ctx, t, s, restarted, expect(restartAt), "before the restart")
	first.stop(t)
	second := startAggregation(ctx, t, s, events, restarted, clock2, origin)
	second.waitCaughtUp(t)
	second.step(t, clock2, checkAt, -1)
	wantAt(ctx, t, s, restarted, expect(checkAt), "restarted")
	// It re-read only the span of the windows still open.
	if n, all := second.agg.Read(), int64(len(phase1)+len(phase2)); n >= all || n < int64(len(phase2)) {
		t.Fatalf("the restarted aggregation read %d events of %d", n, all)
	}

	runWhole.step(t, clock, endAt, -1)
	second.step(t, clock2, endAt, -1)
	want := expect(endAt)
	wantAt(ctx, t, s, whole, want, "uninterrupted, at the end")
	wantAt(ctx, t, s, restarted, want, "restarted, at the end")
	runWhole.stop(t)
	second.stop(t)
}

type runningAggregation struct {
	agg    *contexts.Aggregation
	store  *runningStore
	sender *kafkaio.SnapshotSender
	origin time.Time
	cancel context.CancelFunc
	done   chan error
}

// startAggregation runs an Aggregation of events into snapshots, its
// publisher seeded from a store of snapshots, on clock.
func startAggregation(ctx context.Context, t *testing.T, s kafkaio.Settings, events, snapshots string, clock *clockwork.FakeClock, origin time.Time) *runningAggregation {
	t.Helper()
	codec, _ := schemas.NewCodec()
	r := &runningAggregation{store: startStore(ctx, t, s, snapshots, codec), done: make(chan error, 1), origin: origin}
	var err error
	if r.sender, err = kafkaio.NewSnapshotSender(s, codec, snapshots); err != nil {
		t.Fatal(err)
	}
	pub, err := contexts.NewPublisher(contexts.PublisherConfig{}, r.sender, contexts.WithPublisherClock(clock),
		contexts.WithSeed(func(tenant, e string) *schemas.ContextSnapshot {
			got, _ := r.store.store.Get(tenant, e)
			return got.Snapshot
		}))
	if err != nil {
		t.Fatal(err)
	}
	r.agg, err = contexts.NewAggregation(kafkaAggregate, kafkaFormat, kafkaio.EventReader{Settings: s, Topic: events}, pub,
		contexts.WithAggregationClock(clock), contexts.WithHeartbeat(24*time.Hour), contexts.WithAggregationLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	go func() { r.done <- r.agg.Run(rctx) }()
	if err := clock.BlockUntilContext(ctx, 1); err != nil { // its ticker
		t.Fatal(err)
	}
	return r
}

// waitCaughtUp waits until the aggregation has read some events (a restarted
// one replays before it reads anything new).
func (r *runningAggregation) waitCaughtUp(t *testing.T) {
	t.Helper()
	waitFor(t, "the replay", func() bool { return r.agg.Read() > 0 })
}

// step waits until the aggregation read events (-1: any), then moves the
// clock to origin+at.
func (r *runningAggregation) step(t *testing.T, clock *clockwork.FakeClock, at time.Duration, events int) {
	t.Helper()
	if events >= 0 {
		waitFor(t, fmt.Sprintf("%d events read", events), func() bool { return r.agg.Read() >= int64(events) })
	}
	clock.Advance(r.origin.Add(at).Sub(clock.Now()))
}

func (r *runningAggregation) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := <-r.done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	r.sender.Close()
	r.store.stop(t)
}

// wantAt waits (up to 20s) until the snapshots topic holds want (features
// by entity).
func wantAt(ctx context.Context, t *testing.T, s kafkaio.Settings, topic string, want map[string]map[string]float64, what string) {
	t.Helper()
	codec, _ := schemas.NewCodec()
	st := startStore(ctx, t, s, topic, codec)
	defer st.stop(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := map[string]map[string]float64{}
		for k := range want {
			if e, ok := st.store.Get("", k); ok {
				got[k] = e.Snapshot.Features
			}
		}
		n := st.store.Len()
		if n == len(want) && maps.EqualFunc(got, want, func(a, b map[string]float64) bool { return maps.Equal(a, b) }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the snapshots hold (%d entities)\n%v\nwant\n%v", what, n, describeAll(got), describeAll(want))
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func describeAll(m map[string]map[string]float64) string {
	out := ""
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out += fmt.Sprintf("%s=%v\n", k, m[k])
	}
	return out
}
