package router_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/router/routertest"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// BenchmarkEventLoopProgress measures the router's cost of one progress
// chunk, without Kafka: 1,000 intents pending, b.N progress responses spread
// over them (a 40-byte partial each, in sequence), each decoded, checked,
// published as an IntentProgress and written to the pending changelog. One
// op is one chunk. Compare with BenchmarkEventLoop's cost of one intent
// (request and answer).
func BenchmarkEventLoopProgress(b *testing.B) {
	const pendingIntents = 1000
	for _, d := range []string{config.AtLeastOnce, config.ExactlyOnce} {
		b.Run(d, func(b *testing.B) {
			cfg, err := config.Parse("bench.yaml", []byte(testConfig), nil)
			if err != nil {
				b.Fatal(err)
			}
			cfg.Router.Delivery = d
			cfg.Router.MaxPending = 1 << 30
			cfg.Intents["echo"].Progress.MaxPerIntent = 1 << 30
			cfg.Intents["echo"].Progress.MaxBytes = 1 << 40
			codec, err := schemas.NewCodec()
			if err != nil {
				b.Fatal(err)
			}
			src := routertest.NewSource()
			sink := newCountingSink(d == config.ExactlyOnce)
			r, err := router.New(cfg, codec, src, sink, router.WithClock(clockwork.NewFakeClockAt(t0)),
				router.WithCommitClock(clockwork.NewRealClock()), router.WithRegisterer(prometheus.NewRegistry()),
				router.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					b.Error(err)
				}
			}()
			src.Push(port.Assigned{{Topic: requests}, {Topic: responses}})
			ts := t0.UnixMilli()
			reqs := make([]any, pendingIntents)
			for i := range reqs {
				id := "b-" + strconv.Itoa(i)
				rv, err := codec.Encode(requests, &schemas.IntentRequest{IntentID: id, IntentType: "echo", Payload: `{"q":1}`})
				if err != nil {
					b.Fatal(err)
				}
				reqs[i] = &port.Record{Topic: requests, Offset: int64(i), Key: []byte(id), Value: rv, TimestampMs: ts}
			}
			deadline := time.After(5 * time.Minute)
			sink.expect(echoTopic, pendingIntents)
			src.Push(reqs...)
			select {
			case <-sink.done:
			case <-deadline:
				b.Fatal("the intents were not dispatched")
			}
			chunks := make([]any, b.N)
			partial := schemas.JSON(`{"text":"a chunk of some thirty bytes "}`)
			for i := range b.N {
				id := "b-" + strconv.Itoa(i%pendingIntents)
				seq := int64(i/pendingIntents + 1)
				v, err := codec.Encode(responses, &schemas.AgentResponse{RequestID: id, Agent: "echo", Status: schemas.StatusProgress, Sequence: &seq, Partial: &partial})
				if err != nil {
					b.Fatal(err)
				}
				chunks[i] = &port.Record{Topic: responses, Offset: int64(i), Key: []byte(id), Value: v, TimestampMs: ts}
			}
			sink.expect(config.DefaultProgress, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			src.Push(chunks...)
			select {
			case <-sink.done:
			case <-deadline:
				b.Fatalf("the router did not publish %d progress records", b.N)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "chunks/s")
		})
	}
}
