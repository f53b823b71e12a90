package contexts_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/switchboard-mcp/switchboard/contexts"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// BenchmarkStoreLookup is the cost the router pays per attached intent.
func BenchmarkStoreLookup(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			codec, _ := schemas.NewCodec()
			backlog := make([]record, n)
			for i := range backlog {
				e := fmt.Sprintf("user-%d", i)
				backlog[i] = record{e, encode(b, codec, snap(e, 1, t0, map[string]float64{"clicks_5m": 3, "spend_1h": 42}))}
			}
			s := runStoreB(b, newFakeTopic(backlog...), contexts.WithClock(clockwork.NewFakeClockAt(t0)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if got, _ := s.Lookup("", backlog[i%n].key, 0); got == nil {
					b.Fatal("missing")
				}
			}
		})
	}
}

// BenchmarkAggregatorAdd: one event into three features, one hopping.
func BenchmarkAggregatorAdd(b *testing.B) {
	a, err := contexts.NewAggregator(restartConfig, at(0))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ts := at(float64(i%600) / 10)
		a.Add(contexts.Event{Key: fmt.Sprintf("u%d", i%1000), TimeMs: ts, ArrivalMs: ts, Values: map[string]float64{"amount": 1}})
		if i%10_000 == 0 {
			a.Advance(ts + time.Hour.Milliseconds())
		}
	}
}
