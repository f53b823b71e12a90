package kafkaio_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/embedded"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
)

func TestEnsureTopicsEmbedded(t *testing.T) {
	c, err := embedded.Start(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testEnsureTopics(t, c.Bootstrap())
}

func plansFor(t *testing.T, prefix string, partitions int) []config.TopicPlan {
	t.Helper()
	y := fmt.Sprintf(`
topics:
  requests: %[1]s.req
  responses: %[1]s.resp
  results: %[1]s.res
  timeouts: %[1]s.to
  progress: %[1]s.prog
  dead_letter: %[1]s.dlq
  pending: %[1]s.pending
  fallback_cache: %[1]s.cache
  context_snapshots: %[1]s.ctx
  partitions: %[2]d
  retention: 24h
agents: {a: {topic: %[1]s.agent}}
intents: {e: {agent: a}}
`, prefix, partitions)
	cfg, err := config.Parse("t.yaml", []byte(y), nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.TopicPlans()
}

func testEnsureTopics(t *testing.T, bootstrap string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := kafkaio.Settings{Bootstrap: bootstrap}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	prefix := "tp." + hex.EncodeToString(b)
	plans := plansFor(t, prefix, 3)

	status := func(reps []kafkaio.TopicReport) map[string]kafkaio.TopicReport {
		m := map[string]kafkaio.TopicReport{}
		for _, r := range reps {
			m[r.Plan.Name] = r
		}
		return m
	}
	reps, err := kafkaio.EnsureTopics(ctx, s, plans, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reps {
		if r.Status != kafkaio.TopicMissing {
			t.Fatalf("check before create: %s is %s", r.Plan.Name, r.Status)
		}
	}
	if reps, err = kafkaio.EnsureTopics(ctx, s, plans, true); err != nil {
		t.Fatal(err)
	}
	for _, r := range reps {
		if r.Status != kafkaio.TopicCreated {
			t.Fatalf("create: %s is %s", r.Plan.Name, r.Status)
		}
	}
	if reps, err = kafkaio.EnsureTopics(ctx, s, plans, true); err != nil {
		t.Fatal(err)
	}
	for _, r := range reps {
		if r.Status != kafkaio.TopicMatched {
			t.Fatalf("second create: %s is %s %v", r.Plan.Name, r.Status, r.Conflicts)
		}
	}
	// The same names with 6 partitions: every topic conflicts on its count,
	// and the compacted ones are seen to be compacted.
	reps, err = kafkaio.EnsureTopics(ctx, s, plansFor(t, prefix, 6), true)
	if err != nil {
		t.Fatal(err)
	}
	m := status(reps)
	req := m[prefix+".req"]
	if req.Status != kafkaio.TopicConflict || len(req.Conflicts) != 1 || req.Conflicts[0] != "partitions 3, want 6 (intent-keyed topics must share one partition count)" {
		t.Fatalf("requests: %+v", req)
	}
	if cache := m[prefix+".cache"]; cache.Status != kafkaio.TopicConflict || len(cache.Conflicts) != 1 {
		t.Fatalf("fallback cache: %+v (a compacted topic must match its cleanup policy)", cache)
	}
}

// No broker answers and the caller gives up (a Ctrl-C while serve starts):
// the metadata wait ends with the cancellation, not with the refusal its
// 15 s deadline would bring.
func TestEnsureTopicsEndsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() {
		_, err := kafkaio.EnsureTopics(ctx, kafkaio.Settings{Bootstrap: "127.0.0.1:1"}, nil, false)
		got <- err
	}()
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("EnsureTopics after the cancel: %v, want context.Canceled", err)
	}
}
