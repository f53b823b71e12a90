package lookup_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"testing"

	"github.com/jonboulle/clockwork"

	"github.com/switchboard-mcp/switchboard/api/lookup"
	"github.com/switchboard-mcp/switchboard/api/lookup/lookuptest"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// BenchmarkMaterialize measures reading results into the store (a rebuild,
// or catching up after a restart): per record, decoding, encoding and the
// batch. Target: over 50,000 records/s on one core.
func BenchmarkMaterialize(b *testing.B) {
	codec, err := schemas.NewCodec()
	if err != nil {
		b.Fatal(err)
	}
	src := lookuptest.NewSource()
	src.CreateTopic("r", "r", 6)
	src.CreateTopic("t", "t", 6)
	for i := range b.N {
		res := result("bench", fmt.Sprintf("bench-%09d", i), schemas.OutcomeAnswered, int64(i))
		res.SessionID = schemas.Ptr("session-1")
		v, err := codec.Encode("r", res)
		if err != nil {
			b.Fatal(err)
		}
		src.Append("r", int32(i%6), []byte(res.IntentID), v)
	}
	store, err := lookup.Open(b.TempDir(), lookup.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	m, err := lookup.NewMaterializer(lookup.Config{
		Results: "r", Timeouts: "t", Store: store, Source: src, Codec: codec,
		Clock: clockwork.NewFakeClock(), Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	for !store.Ready() {
		select {
		case err := <-done:
			b.Fatal(err)
		default:
		}
		runtimeGosched()
	}
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	if err := store.Flush(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(store.DiskBytes())/float64(b.N), "disk-B/record")
}

func runtimeGosched() { runtime.Gosched() }
