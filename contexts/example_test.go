package contexts_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/switchboard-mcp/switchboard/contexts"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// printSender prints the snapshots a Publisher produces (in production:
// kafkaio.SnapshotSender).
type printSender struct{}

func (printSender) SendSnapshot(_ context.Context, s *schemas.ContextSnapshot) error {
	fmt.Printf("snapshot of %s: %v\n", s.EntityID, s.Features)
	return nil
}

// A context engine hands every update to the delta publisher; only the ones
// that matter become snapshots.
func ExamplePublisher() {
	clock := clockwork.NewFakeClock()
	pub, _ := contexts.NewPublisher(contexts.PublisherConfig{
		Heartbeat:  10 * time.Second,
		Thresholds: map[string]contexts.Threshold{"spend_1h": {Relative: 0.05}},
	}, printSender{}, contexts.WithPublisherClock(clock))
	ctx := context.Background()
	for _, spend := range []float64{100, 103, 104, 106} {
		d, _ := pub.Publish(ctx, "", "user-1", map[string]float64{"spend_1h": spend})
		fmt.Println(spend, d.Reason)
	}
	clock.Advance(10 * time.Second)
	d, _ := pub.Publish(ctx, "", "user-1", map[string]float64{"spend_1h": 106})
	fmt.Println(d.Reason)
	// Output:
	// snapshot of user-1: map[spend_1h:100]
	// 100 first
	// 103 suppressed
	// 104 suppressed
	// snapshot of user-1: map[spend_1h:106]
	// 106 changed
	// snapshot of user-1: map[spend_1h:106]
	// heartbeat
}

// The window engine is pure: events in, time in, features out.
func ExampleAggregator() {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	agg, _ := contexts.NewAggregator(contexts.AggregatorConfig{
		Features: []contexts.WindowFeature{
			{Name: "clicks_5m", Op: contexts.OpCount, Window: 5 * time.Minute},
			{Name: "paid_5m", Op: contexts.OpSum, Field: "amount", Window: 5 * time.Minute},
		},
	}, start.UnixMilli())
	for i, amount := range []float64{5, 7, 30} {
		ts := start.Add(time.Duration(i) * time.Minute).UnixMilli()
		agg.Add(contexts.Event{Key: "user-1", TimeMs: ts, ArrivalMs: ts, Values: map[string]float64{"amount": amount}})
	}
	for _, u := range agg.Advance(start.Add(5 * time.Minute).UnixMilli()) {
		fmt.Println(u.ID, u.Features)
	}
	// Output:
	// user-1 map[clicks_5m:3 paid_5m:42]
}
