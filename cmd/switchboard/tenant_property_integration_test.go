//go:build integration && linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/schemas"
)

const tenantPropertyConfig = `kafka:
  bootstrap_servers: %[2]s
  group_id: %[1]s.router
` + shortTopics + `  partitions: 3
  auto_create: true
agents:
  echo: {topic: %[1]s.agent.echo, encoding: json}
  mute: {topic: %[1]s.agent.mute, encoding: json}
intents:
  echo: {agent: echo, timeout: 30s}
  hold: {agent: mute, timeout: 10m}
http:
  listen: 127.0.0.1:0
  lookup: {dir: %[3]s}
  auth:
    mode: required
    api_keys:
      - {name: acme, tenant: acme, key_env: SWITCHBOARD_TEST_KEY_ACME}
      - {name: globex, tenant: globex, key_env: SWITCHBOARD_TEST_KEY_GLOBEX}
`

// TestTwoTenantsRandomOperationsApacheKafka drives two tenants' random
// operations through the HTTP API of a real serve process, its router and
// an agent, on Apache Kafka: submissions with explicit ids from one small
// shared pool (answered types and ones that wait to be cancelled), cancels
// of any id in the pool (the tenant's own and the other's), GETs and waits.
// Every answer a tenant gets must be its own; at the end, after each tenant
// cancels what it left pending, the results topic (read committed) must
// hold exactly one result per (tenant, id) submitted, none for an id a
// tenant never submitted, and a cancel's reason only from the intent's own
// tenant. Seeds are fixed; SWITCHBOARD_TENANT_OPS sets the number of
// operations (default 400).
func TestTwoTenantsRandomOperationsApacheKafka(t *testing.T) {
	bootstrap := kafkaBootstrap(t)
	ops := 400
	if v, err := fmt.Sscan(os.Getenv("SWITCHBOARD_TENANT_OPS"), &ops); v != 1 || err != nil {
		ops = 400
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "switchboard")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	prefix := "tenants." + randomHex(4)
	cfg := filepath.Join(dir, "switchboard.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, tenantPropertyConfig, prefix, bootstrap, filepath.Join(dir, "lookup")), 0o600); err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{"acme": "key-acme-" + randomHex(8), "globex": "key-globex-" + randomHex(8)}
	env := append(os.Environ(), "SWITCHBOARD_TEST_KEY_ACME="+keys["acme"], "SWITCHBOARD_TEST_KEY_GLOBEX="+keys["globex"])
	node := &lookupNode{t: t, proc: &proc{
		name: "serve", bin: bin, logPath: filepath.Join(dir, "serve.log"), env: env,
		args: []string{"serve", "--config", cfg, "--instance-id", "tenants-1"},
	}}
	agent := &proc{
		name: "agent", bin: bin, logPath: filepath.Join(dir, "agent.log"), env: env,
		args: []string{"agent", "--config", cfg, "--name", "echo"},
	}
	defer func() {
		node.proc.stop(20 * time.Second)
		agent.stop(10 * time.Second)
		if t.Failed() {
			t.Logf("serve log (tail):\n%s", node.proc.tail(40))
		}
	}()
	node.start(ctx)
	if err := agent.start(); err != nil {
		t.Fatal(err)
	}

	client := &http.Client{Timeout: 30 * time.Second}
	call := func(tenant, method, path, body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, node.base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+keys[tenant])
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s as %s: %v", method, path, tenant, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			t.Fatalf("%s %s as %s: reading the body: %v", method, path, tenant, err)
		}
		return resp.StatusCode, b
	}
	// ownAnswer fails the test when a 200 answer of a GET names another
	// tenant's intent.
	ownAnswer := func(tenant, what string, code int, body []byte) {
		t.Helper()
		if code != http.StatusOK {
			return
		}
		var v struct {
			Tenant *string `json:"tenant"`
			Status string  `json:"status"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("%s as %s: %v: %s", what, tenant, err, body)
		}
		if v.Status == "resolved" && (v.Tenant == nil || *v.Tenant != tenant) {
			t.Fatalf("%s as %s answered another tenant's intent: %s", what, tenant, body)
		}
	}

	type key struct{ tenant, id string }
	tenants := []string{"acme", "globex"}
	ids := []string{"p-1", "p-2", "p-3", "p-4", "p-5", "p-6"}
	submitted := map[key]string{} // (tenant, id) -> its type
	bodies := map[key]string{}    // (tenant, id) -> the body it was submitted with
	rng := rand.New(rand.NewPCG(21, 13))
	for i := range ops {
		tn := tenants[rng.IntN(2)]
		id := ids[rng.IntN(len(ids))]
		switch op := rng.IntN(10); {
		case op < 4: // submit, with an explicit id that the other tenant may use too
			typ := "echo"
			if rng.IntN(3) == 0 {
				typ = "hold"
			}
			req := fmt.Sprintf(`{"intent_id":%q,"intent_type":%q,"payload":{"op":%d}}`, id, typ, i)
			if prev, ok := bodies[key{tn, id}]; ok {
				req, typ = prev, submitted[key{tn, id}] // a retry of the same intent: the same body
			}
			code, body := call(tn, http.MethodPost, "/v1/intents", req)
			if code != http.StatusAccepted && code != http.StatusOK {
				t.Fatalf("op %d: POST %s as %s: %d %s", i, id, tn, code, body)
			}
			submitted[key{tn, id}], bodies[key{tn, id}] = typ, req
		case op < 6: // cancel any id, the tenant's own or not
			code, body := call(tn, http.MethodDelete, "/v1/intents/"+id+"?reason=by-"+tn, "")
			if code >= 500 {
				t.Fatalf("op %d: DELETE %s as %s: %d %s", i, id, tn, code, body)
			}
		case op < 9:
			code, body := call(tn, http.MethodGet, "/v1/intents/"+id, "")
			ownAnswer(tn, fmt.Sprintf("op %d: GET %s", i, id), code, body)
		default:
			code, body := call(tn, http.MethodGet, "/v1/intents/"+id+"?wait=200ms", "")
			ownAnswer(tn, fmt.Sprintf("op %d: GET %s?wait", i, id), code, body)
		}
	}
	// Each tenant cancels what it left pending, so that every submitted
	// intent has its result; then every one must be resolved, as its own.
	for k := range submitted {
		call(k.tenant, http.MethodDelete, "/v1/intents/"+k.id+"?reason=by-"+k.tenant, "")
	}
	for k := range submitted {
		if err := waitUntil(ctx, 2*time.Minute, 100*time.Millisecond, func() bool {
			code, body := call(k.tenant, http.MethodGet, "/v1/intents/"+k.id, "")
			ownAnswer(k.tenant, "GET "+k.id, code, body)
			return code == http.StatusOK && strings.Contains(string(body), `"status":"resolved"`)
		}); err != nil {
			t.Fatalf("(%s, %s) never resolved: %v", k.tenant, k.id, err)
		}
	}

	results := map[key][]*schemas.IntentResult{}
	codec, err := schemas.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	if err := readToEnd(ctx, bootstrap, prefix+".result", func(m *kafka.Message) {
		var r schemas.IntentResult
		if err := codec.Decode(m.Value, &r); err != nil {
			t.Errorf("undecodable result at %v: %v", m.TopicPartition, err)
			return
		}
		k := key{intents.TenantOf(r.Tenant), r.IntentID}
		results[k] = append(results[k], &r)
	}); err != nil {
		t.Fatal(err)
	}
	for k, typ := range submitted {
		rs := results[k]
		if len(rs) != 1 {
			t.Errorf("(%s, %s) %s: %d results on the results topic, want exactly 1", k.tenant, k.id, typ, len(rs))
			continue
		}
		if r := rs[0]; r.Outcome == schemas.OutcomeCancelled && (r.Error == nil || r.Error.Message != "by-"+k.tenant) {
			t.Errorf("(%s, %s) was cancelled with %+v: not by its own tenant", k.tenant, k.id, r.Error)
		}
	}
	for k, rs := range results {
		if _, ok := submitted[k]; !ok {
			t.Errorf("(%s, %s) was never submitted but has %d results", k.tenant, k.id, len(rs))
		}
	}
	t.Logf("%d operations, %d intents of two tenants on %d shared ids, %d with results", ops, len(submitted), len(ids), len(results))
}
