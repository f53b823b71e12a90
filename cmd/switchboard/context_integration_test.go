//go:build integration

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestContextAttachApacheKafka is issue 8's done-when on Apache Kafka: a
// 'switchboard serve' and a demo agent, a 'context publish' for user-1, then
// a fraud_check intent with context_ref user-1 whose agent receives the
// snapshot and whose result's timeline names it.
func TestContextAttachApacheKafka(t *testing.T) {
	bootstrap := os.Getenv("KAFKA_BOOTSTRAP")
	if bootstrap == "" {
		t.Fatal("KAFKA_BOOTSTRAP is not set: run 'make test-integration'")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var b [4]byte
	_, _ = rand.Read(b[:])
	p := "cx." + hex.EncodeToString(b[:])
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := l.Addr().String()
	_ = l.Close()
	cfgFile := filepath.Join(t.TempDir(), "switchboard.yaml")
	cfg := fmt.Sprintf(`kafka: {bootstrap_servers: %[2]q, group_id: %[1]s.router}
topics:
  requests: %[1]s.request
  responses: %[1]s.response
  results: %[1]s.result
  timeouts: %[1]s.timeout
  progress: %[1]s.progress
  dead_letter: %[1]s.dlq
  pending: %[1]s.pending
  fallback_cache: %[1]s.cache
  context_snapshots: %[1]s.context
  partitions: 3
  auto_create: true
agents:
  slow: {topic: %[1]s.agent.slow}
intents:
  fraud_check: {agent: slow, timeout: 10s, context: attach}
http: {listen: %[3]q, auth: {mode: off}} # only /readyz is used
log: {level: warn}
`, p, bootstrap, httpAddr)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var serveErr, agentErr syncBuffer
	served, agentDone := make(chan int, 1), make(chan int, 1)
	go func() {
		served <- run(ctx, []string{"serve", "--insecure-no-auth", "--config", cfgFile}, &bytes.Buffer{}, &serveErr)
	}()
	go func() {
		agentDone <- run(ctx, []string{"agent", "--name", "slow", "--config", cfgFile}, &bytes.Buffer{}, &agentErr)
	}()
	eventually(t, "serve to be ready", func() bool {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	cli := func(args ...string) map[string]any {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(ctx, append(args, "--config", cfgFile), &out, &errOut); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
		}
		var m map[string]any
		if err := json.Unmarshal(out.Bytes(), &m); err != nil {
			t.Fatalf("%v printed %q", args, out.String())
		}
		return m
	}
	d := cli("context", "publish", "--entity", "user-1", "--features", `{"declines_1h":2}`)
	if d["published"] != true {
		t.Fatalf("publish: %v", d)
	}
	var res map[string]any
	eventually(t, "a fraud_check that received the snapshot", func() bool {
		res = cli("send", "--type", "fraud_check", "--payload", `{"demo":{"delay_ms":0}}`, "--context-ref", "user-1", "--wait", "20s")
		answer, _ := res["answer"].(map[string]any)
		return res["outcome"] == "answered" && answer["context_status"] == "fresh"
	})
	got, _ := res["answer"].(map[string]any)["context"].(map[string]any)
	tl, _ := res["timeline"].(map[string]any)
	if got["version"] != d["version"] || tl["context_version"] != d["version"] || tl["context_ts"] != d["snapshot_ts"] {
		t.Fatalf("published %v; the agent received %v; the timeline says %v", d, got, tl)
	}
	t.Logf("agent received context %v; timeline %v", got, tl)
	cancel()
	if code := <-served; code != 0 {
		t.Fatalf("serve exited %d: %s", code, serveErr.String())
	}
	<-agentDone
}
