package router_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
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

// countingSink keeps no outputs, only how many went to each topic, and
// acknowledges at once: the cheapest sink, so the benchmark measures the
// router. It is also a TxSink whose transactions always commit.
type countingSink struct {
	mu     sync.Mutex
	counts map[string]int
	want   map[string]int
	done   chan string
	acks   chan port.Ack
	tx     bool
}

func newCountingSink(tx bool) *countingSink {
	return &countingSink{counts: map[string]int{}, want: map[string]int{}, done: make(chan string, 4), acks: make(chan port.Ack, 1<<22), tx: tx} // Produce runs in the event loop: never block it
}

func (k *countingSink) expect(topic string, n int) {
	k.mu.Lock()
	k.want[topic] = n
	k.mu.Unlock()
}

func (k *countingSink) Produce(o *port.Output, opaque any) error {
	k.mu.Lock()
	k.counts[o.Topic]++
	if k.counts[o.Topic] == k.want[o.Topic] {
		k.done <- o.Topic
	}
	k.mu.Unlock()
	if !k.tx {
		k.acks <- port.Ack{Opaque: opaque}
	}
	return nil
}

// ProduceAtOnce implements port.TxSink: counted and acknowledged at once.
func (k *countingSink) ProduceAtOnce(o *port.Output, opaque any) error {
	k.mu.Lock()
	k.counts[o.Topic]++
	if k.counts[o.Topic] == k.want[o.Topic] {
		k.done <- o.Topic
	}
	k.mu.Unlock()
	k.acks <- port.Ack{Opaque: opaque}
	return nil
}

func (k *countingSink) Acks() <-chan port.Ack { return k.acks }
func (k *countingSink) Close() error          { return nil }
func (k *countingSink) Begin() error          { return nil }
func (k *countingSink) SendOffsets(context.Context, map[port.TopicPartition]int64, any) error {
	return nil
}
func (k *countingSink) Commit(context.Context) error { return nil }
func (k *countingSink) Abort(context.Context) error  { return nil }
func (k *countingSink) Reset() error                 { return nil }

// BenchmarkEventLoop measures the router without Kafka: records in through
// an in-memory Source, outputs counted by a sink that keeps nothing. One op is
// one intent: its request (decode, validate, route, dispatch, pending state)
// and its response (pair, result, resolved state), in JSON. cpu-ns/op is
// the process's CPU time per intent.
func BenchmarkEventLoop(b *testing.B) { benchmarkEventLoop(b) }

func benchmarkEventLoop(b *testing.B, opts ...router.Option) {
	for _, d := range []string{config.AtLeastOnce, config.ExactlyOnce} {
		b.Run(d, func(b *testing.B) {
			cfg, err := config.Parse("bench.yaml", []byte(testConfig), nil)
			if err != nil {
				b.Fatal(err)
			}
			cfg.Router.Delivery = d
			cfg.Router.MaxPending = 1 << 30
			codec, err := schemas.NewCodec()
			if err != nil {
				b.Fatal(err)
			}
			src := routertest.NewSource()
			sink := newCountingSink(d == config.ExactlyOnce)
			r, err := router.New(cfg, codec, src, sink, append([]router.Option{
				router.WithClock(clockwork.NewFakeClockAt(t0)),
				router.WithCommitClock(clockwork.NewRealClock()), router.WithRegisterer(prometheus.NewRegistry()),
				router.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
			}, opts...)...)
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

			reqs, resps := make([]any, b.N), make([]any, b.N)
			ans := schemas.JSON(`{"ok":true}`)
			ts := t0.UnixMilli()
			for i := range b.N {
				id := "b-" + strconv.Itoa(i)
				rv, err := codec.Encode(requests, &schemas.IntentRequest{IntentID: id, IntentType: "echo", Payload: `{"q":1}`})
				if err != nil {
					b.Fatal(err)
				}
				av, err := codec.Encode(responses, &schemas.AgentResponse{RequestID: id, Agent: "echo", Status: schemas.StatusOK, Answer: &ans})
				if err != nil {
					b.Fatal(err)
				}
				reqs[i] = &port.Record{Topic: requests, Offset: int64(i), Key: []byte(id), Value: rv, TimestampMs: ts}
				resps[i] = &port.Record{Topic: responses, Offset: int64(i), Key: []byte(id), Value: av, TimestampMs: ts}
			}
			sink.expect(echoTopic, b.N)
			sink.expect(results, b.N)
			deadline := time.After(5 * time.Minute)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			src.Push(reqs...)
			for _, want := range []string{echoTopic, results} {
				if want == results {
					src.Push(resps...)
				}
				select {
				case <-sink.done:
				case <-deadline:
					b.Fatalf("the router did not produce %d %s records", b.N, want)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "intents/s")
			// CPU time per intent, every goroutine of the process (the
			// loop, the poll goroutine, the collector): what the shared
			// host's other work does not stretch, unlike ns/op.
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
