package contexts_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/contexts"
	"github.com/switchboard-mcp/switchboard/router/embedded"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// These tests run the store and the publisher over Kafka: on the embedded
// broker here, and on Apache Kafka in kafka_integration_test.go.

func randomHex() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func TestStoreOverTheEmbeddedBroker(t *testing.T) {
	cluster, err := embedded.Start(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	testStoreOverKafka(t, cluster.Bootstrap(), false)
}

// testStoreOverKafka publishes snapshots and tombstones to a compacted topic
// and checks that a store started afterwards (a restart) holds the newest
// snapshot of every entity and none of the deleted ones, whether or not the
// broker has compacted the topic yet, and that it follows what comes next.
//
// With compaction, it first waits (up to 30s) for the broker to compact the
// topic, and says whether it did.
func testStoreOverKafka(t *testing.T, bootstrap string, compaction bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s := kafkaio.Settings{Bootstrap: bootstrap}
	topic := "cx." + randomHex() + ".snapshot"
	if _, err := kafkaio.CreateTopics(ctx, s, []kafkaio.TopicSpec{{
		Name: topic, Partitions: 3, ReplicationFactor: 1,
		// Compact as soon as the broker will: small segments, any dirt.
		Config: map[string]string{"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "100"},
	}}); err != nil {
		t.Fatal(err)
	}
	codec, _ := schemas.NewCodec()
	sender, err := kafkaio.NewSnapshotSender(s, codec, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	pub, err := contexts.NewPublisher(contexts.PublisherConfig{}, sender)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		for _, e := range []string{"user-1", "user-2", "user-3", "user-4"} {
			if _, err := pub.Publish(ctx, "", e, map[string]float64{"n": float64(i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	last, _ := pub.Publish(ctx, "", "user-1", map[string]float64{"n": 99})
	tombstones, err := kafkaio.NewProducer(s)
	if err != nil {
		t.Fatal(err)
	}
	defer tombstones.Close(5 * time.Second)
	for _, e := range []string{"user-2", "user-4"} {
		if err := tombstones.Send(ctx, topic, []byte(e), nil, nil, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}

	check := func(store *contexts.Store) {
		t.Helper()
		if got, _ := store.Lookup("", "user-1", time.Hour); got == nil || got.Version != last.Snapshot.Version || got.Features["n"] != 99 {
			t.Fatalf("user-1: %+v, want version %d with n=99", got, last.Snapshot.Version)
		}
		if got, _ := store.Lookup("", "user-3", time.Hour); got == nil || got.Features["n"] != 4 {
			t.Fatalf("user-3: %+v", got)
		}
		for _, e := range []string{"user-2", "user-4"} {
			if got, status := store.Lookup("", e, time.Hour); got != nil || status != schemas.ContextMissing {
				t.Fatalf("%s was deleted, the store holds %+v", e, got)
			}
		}
		if store.Len() != 2 {
			t.Fatalf("the store holds %d entities, want 2", store.Len())
		}
	}
	const written = 4*5 + 1 + 2
	first := startStore(ctx, t, s, topic, codec)
	check(first.store)
	first.stop(t)
	if compaction {
		waitForCompaction(ctx, t, s, topic, tombstones, written)
	}

	// A restart, once the broker had time to compact (it may or may not
	// have): the same answers.
	second := startStore(ctx, t, s, topic, codec)
	defer second.stop(t)
	check(second.store)

	// It follows the topic.
	d, err := pub.Publish(ctx, "", "user-5", map[string]float64{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := tombstones.Send(ctx, topic, []byte("user-3"), nil, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	for {
		got, _ := second.store.Lookup("", "user-5", time.Hour)
		gone, _ := second.store.Lookup("", "user-3", time.Hour)
		if got != nil && got.Version == d.Snapshot.Version && gone == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the store did not follow the topic: user-5 %+v, user-3 %+v", got, gone)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

type runningStore struct {
	store  *contexts.Store
	cancel context.CancelFunc
	done   chan error
}

func startStore(ctx context.Context, t *testing.T, s kafkaio.Settings, topic string, codec *schemas.Codec) *runningStore {
	t.Helper()
	store, err := contexts.NewStore(kafkaio.SnapshotReader{Settings: s, Topic: topic}, codec, contexts.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	r := &runningStore{store: store, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- store.Run(rctx) }()
	select {
	case <-store.CaughtUp():
	case err := <-r.done:
		t.Fatalf("the store stopped before catching up: %v", err)
	case <-ctx.Done():
		t.Fatal("the store never caught up")
	}
	if err := store.Ready(); err != nil {
		t.Fatalf("caught up but not ready: %v", err)
	}
	return r
}

func (r *runningStore) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := <-r.done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// waitForCompaction waits up to 30s until topic holds fewer records than
// were written to it, rolling segments with tombstones of a key nobody uses
// (the cleaner leaves the active segment alone).
func waitForCompaction(ctx context.Context, t *testing.T, s kafkaio.Settings, topic string, p *kafkaio.Producer, written int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if err := p.Send(ctx, topic, []byte("roll"), nil, nil, time.Time{}); err != nil {
			t.Fatal(err)
		}
		written++
		n := 0
		rctx, cancel := context.WithCancel(ctx)
		_ = kafkaio.Read(rctx, s, kafkaio.Reading{Topics: []string{topic}, From: kafkaio.FromBeginning(), OnCaughtUp: cancel}, func(*port.Record) error { n++; return nil })
		cancel()
		if n < written {
			t.Logf("the broker compacted the topic: %d records left of %d written", n, written)
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(time.Second):
		}
	}
	t.Logf("the broker did not compact the topic within 30s (its cleaner's schedule); checking the uncompacted log")
}
