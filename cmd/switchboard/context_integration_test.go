//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
	bootstrap := apacheKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p := runPrefix("cx")
	httpAddr := freeLoopback(t)
	cfgFile := filepath.Join(t.TempDir(), "switchboard.yaml")
	cfg := fmt.Sprintf(`kafka: {bootstrap_servers: %[2]q, group_id: %[1]s.router}
`+shortTopics+`  partitions: 3
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

	// Entities are namespaced by tenant (issue 13): acme's user-2 goes
	// with acme's intents only; globex's intent naming it gets nothing,
	// and so does the intent without a tenant.
	if d := cli("context", "publish", "--tenant", "acme", "--entity", "user-2", "--features", `{"secret":7}`); d["published"] != true || d["tenant"] != "acme" {
		t.Fatalf("publish for acme: %v", d)
	}
	eventually(t, "acme's fraud_check that received acme's snapshot", func() bool {
		res = cli("send", "--tenant", "acme", "--type", "fraud_check", "--payload", `{"demo":{"delay_ms":0}}`, "--context-ref", "user-2", "--wait", "20s")
		answer, _ := res["answer"].(map[string]any)
		return res["outcome"] == "answered" && answer["context_status"] == "fresh"
	})
	for _, tenant := range []string{"globex", ""} {
		args := []string{"send", "--type", "fraud_check", "--payload", `{"demo":{"delay_ms":0}}`, "--context-ref", "user-2", "--wait", "20s"}
		if tenant != "" {
			args = append(args, "--tenant", tenant)
		}
		res = cli(args...)
		answer, _ := res["answer"].(map[string]any)
		if res["outcome"] != "answered" || answer["context_status"] != "missing" || answer["context"] != nil {
			t.Fatalf("tenant %q's intent naming acme's entity: %v", tenant, res)
		}
	}
	cancel()
	if code := <-served; code != 0 {
		t.Fatalf("serve exited %d: %s", code, serveErr.String())
	}
	<-agentDone
}
