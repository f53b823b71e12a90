package contexts_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/contexts"
)

// eventLog is a contexts.EventReader over records in memory: those stamped
// at or after since are the past, then live ones come from a channel.
type eventLog struct {
	records []logRecord
	live    chan logRecord
	since   chan time.Time
}

type logRecord struct {
	value string
	ts    int64
}

func (l *eventLog) ReadEvents(ctx context.Context, since time.Time, caughtUp func(), fn func([]byte, int64) error) error {
	l.since <- since
	for _, r := range l.records {
		if r.ts >= since.UnixMilli() {
			if err := fn([]byte(r.value), r.ts); err != nil {
				return nil
			}
		}
	}
	caughtUp()
	for {
		select {
		case <-ctx.Done():
			return nil
		case r := <-l.live:
			if err := fn([]byte(r.value), r.ts); err != nil {
				return nil
			}
		}
	}
}

func clickEvent(user string, ts int64, amount float64) logRecord {
	return logRecord{fmt.Sprintf(`{"user":%q,"ts":%d,"amount":%v}`, user, ts, amount), ts}
}

func TestAggregationPublishesClosedWindows(t *testing.T) {
	clock := clockwork.NewFakeClockAt(b.Add(7 * time.Minute))
	log := &eventLog{
		records: []logRecord{
			clickEvent("u1", at(-60), 100), // before the replay span: not read
			clickEvent("u1", at(10), 1),
			clickEvent("u1", at(200), 2),
			{`not json`, at(201)},
			{fmt.Sprintf(`{"user":"u1","ts":%d,"amount":1}`, at(86400*365)), at(202)}, // from the future: skipped
			clickEvent("u2", at(250), 5),
			clickEvent("u1", at(320), 4), // the next window
		},
		live:  make(chan logRecord),
		since: make(chan time.Time, 1),
	}
	sent := &sentSnapshots{}
	reg := prometheus.NewRegistry()
	pub, err := contexts.NewPublisher(contexts.PublisherConfig{}, sent, contexts.WithPublisherClock(clock), contexts.WithPublisherRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	five := 5 * time.Minute
	agg, err := contexts.NewAggregation(contexts.AggregatorConfig{
		AllowedLateness: time.Minute,
		Features: []contexts.WindowFeature{
			{Name: "clicks_5m", Op: contexts.OpCount, Window: five},
			{Name: "paid_5m", Op: contexts.OpSum, Field: "amount", Window: five},
		},
	}, contexts.EventFormat{KeyField: "user", TimeField: "ts", Fields: []string{"amount"}}, log, pub,
		contexts.WithAggregationClock(clock), contexts.WithAggregationRegisterer(reg), contexts.WithHeartbeat(time.Hour),
		contexts.WithAggregationLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agg.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	// Started at 12:07 with a minute of lateness, the newest closed window
	// is [12:00, 12:05): the replay starts at its beginning.
	if since := <-log.since; !since.Equal(b) {
		t.Fatalf("replays from %s", since)
	}
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the past to be read", func() bool { return agg.Read() == 6 })
	clock.Advance(time.Second)
	waitFor(t, "the [12:00, 12:05) window", func() bool { return sent.count() == 2 })
	got := map[string]map[string]float64{}
	for _, s := range sent.sent {
		got[s.EntityID] = s.Features
	}
	if fmt.Sprint(got) != "map[u1:map[clicks_5m:2 paid_5m:3] u2:map[clicks_5m:1 paid_5m:5]]" {
		t.Fatalf("published %v", got)
	}
	// A live event for the open window, then its close at 12:11.
	log.live <- clickEvent("u2", at(599), 7)
	waitFor(t, "the live event", func() bool { return agg.Read() == 7 })
	clock.Advance(4 * time.Minute)
	waitFor(t, "the [12:05, 12:10) window", func() bool { return sent.count() == 4 })
	got = map[string]map[string]float64{}
	for _, s := range sent.sent[2:] {
		got[s.EntityID] = s.Features
	}
	if fmt.Sprint(got) != "map[u1:map[clicks_5m:1 paid_5m:4] u2:map[clicks_5m:1 paid_5m:7]]" {
		t.Fatalf("published %v", got)
	}
	if pub.Len() != 2 {
		t.Fatalf("the publisher remembers %d entities", pub.Len())
	}
	// [12:10, 12:15) closes empty at 12:16: both entities get zeros, and
	// neither the aggregator nor the publisher holds them any longer.
	clock.Advance(5 * time.Minute)
	waitFor(t, "the empty [12:10, 12:15) window", func() bool { return sent.count() == 6 })
	waitFor(t, "the publisher to forget the entities", func() bool { return pub.Len() == 0 })
	if v := counter(t, reg, "switchboard_context_aggregate_events_total", "invalid"); v != 1 {
		t.Fatalf("invalid events %v", v)
	}
	if v := counter(t, reg, "switchboard_context_aggregate_events_total", "future"); v != 1 {
		t.Fatalf("future events %v", v)
	}
	if err := agg.Run(ctx); !errors.Is(err, contexts.ErrAlreadyStarted) {
		t.Fatalf("second Run: %v", err)
	}
}

// waitFor checks cond every millisecond until it holds, for up to 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}
