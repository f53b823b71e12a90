//go:build integration

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTaskResultWaitLimitApacheKafka is http.max_waiting_per_tenant for MCP
// tasks/result on Apache Kafka, through a whole node with API keys: tasks
// (2025-11-25, task-augmented tools/call) are published and wait for an
// agent that never answers; one tasks/result of tenant acme waits, a second
// is refused at once (JSON-RPC error -32000, data reason "waiting", naming
// acme and no other tenant) while its task goes on (tasks/get: working), a
// tasks/result of tenant globex still waits; cancelling acme's first task
// resolves it through the router, its tasks/result answers, and its slot
// goes to acme's second. http.mcp.max_sessions_per_tenant refuses acme's
// third session: 503, a JSON-RPC error with reason "mcp_sessions".
func TestTaskResultWaitLimitApacheKafka(t *testing.T) {
	bootstrap := apacheKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := runPrefix("taskwait")
	httpAddr := freeLoopback(t)
	const keyAcme, keyGlobex = "sk_acme_taskwait_0123456789", "sk_globex_taskwait_0123456789"
	t.Setenv("SWITCHBOARD_TEST_KEY_ACME", keyAcme)
	t.Setenv("SWITCHBOARD_TEST_KEY_GLOBEX", keyGlobex)
	cfgFile := filepath.Join(t.TempDir(), "switchboard.yaml")
	yaml := fmt.Sprintf(`kafka:
  bootstrap_servers: %[2]q
  group_id: %[1]s.router
`+shortTopics+`  partitions: 2
  auto_create: true
agents:
  worker: {topic: %[1]s.agent.worker, group_id: %[1]s.workers}
intents:
  work: {agent: worker, timeout: 30s}
router: {instance_id: taskwait-1}
http:
  listen: %[3]q
  max_waiting: 3
  max_waiting_per_tenant: 1
  mcp: {max_sessions: 4, max_sessions_per_tenant: 2}
  auth:
    api_keys:
      - {name: acme, tenant: acme, key_env: SWITCHBOARD_TEST_KEY_ACME}
      - {name: globex, tenant: globex, key_env: SWITCHBOARD_TEST_KEY_GLOBEX}
log: {level: warn}
`, p, bootstrap, httpAddr)
	var logs syncBuffer
	n := newNodeFromYAML(ctx, t, cfgFile, yaml, &logs, true)
	nctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- n.run(nctx) }()
	defer func() {
		stop()
		if err := <-ran; err != nil {
			t.Errorf("node: %v", err)
		}
		if t.Failed() {
			t.Logf("node log:\n%s", logs.String())
		}
	}()
	eventually(t, "the node to be ready", func() bool { return n.ready() == nil })

	url := "http://" + httpAddr + "/mcp"
	rpcID := 0
	// mcpPost sends one JSON-RPC request and returns its response (the
	// first message of an event stream) and the session id.
	mcpPost := func(key, sid, method, params string) (map[string]any, string) {
		rpcID++
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, rpcID, method, params)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+key)
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return map[string]any{"transport_error": err.Error()}, ""
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := strings.TrimPrefix(sc.Text(), "data: ")
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["id"] != nil {
				return m, resp.Header.Get("Mcp-Session-Id")
			}
		}
		return map[string]any{"status": resp.StatusCode}, resp.Header.Get("Mcp-Session-Id")
	}
	session := func(key string) string {
		t.Helper()
		m, sid := mcpPost(key, "", "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"it","version":"1"}}`)
		if sid == "" || m["result"] == nil {
			t.Fatalf("initialize: %v", m)
		}
		return sid
	}
	newTask := func(key, sid, n string) string {
		t.Helper()
		m, _ := mcpPost(key, sid, "tools/call", `{"name":"work","arguments":{"n":"`+n+`"},"task":{"ttl":60000}}`)
		res, _ := m["result"].(map[string]any)
		task, _ := res["task"].(map[string]any)
		id, _ := task["taskId"].(string)
		if id == "" {
			t.Fatalf("create task: %v", m)
		}
		return id
	}
	result := func(key, sid, id string) <-chan map[string]any {
		c := make(chan map[string]any, 1)
		params := fmt.Sprintf(`{"taskId":%q}`, id)
		go func() { m, _ := mcpPost(key, sid, "tasks/result", params); c <- m }()
		return c
	}
	waiting := func(want float64) {
		t.Helper()
		eventually(t, fmt.Sprintf("%v callers waiting", want), func() bool {
			return scrape(t, httpAddr)["switchboard_api_waiting_callers"] == want
		})
	}

	acme, globex := session(keyAcme), session(keyGlobex)
	a1, a2, g1 := newTask(keyAcme, acme, "a1"), newTask(keyAcme, acme, "a2"), newTask(keyGlobex, globex, "g1")
	first := result(keyAcme, acme, a1)
	waiting(1)

	m := <-result(keyAcme, acme, a2)
	e, _ := m["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	msg, _ := e["message"].(string)
	if e == nil || e["code"] != float64(-32000) || data["reason"] != "waiting" ||
		!strings.Contains(msg, `tenant "acme" already has 1 callers waiting`) || strings.Contains(msg, "globex") {
		t.Fatalf("acme's second tasks/result: %v", m)
	}
	if v := scrape(t, httpAddr)[`switchboard_api_admission_refused_total{reason="waiting"}`]; v != 1 {
		t.Errorf("refused{waiting} = %v, want 1", v)
	}
	// The refused caller's task goes on: it is pending on Kafka.
	got, _ := mcpPost(keyAcme, acme, "tasks/get", fmt.Sprintf(`{"taskId":%q}`, a2))
	if r, _ := got["result"].(map[string]any); r == nil || r["status"] != "working" {
		t.Fatalf("tasks/get of the refused caller's task: %v", got)
	}
	second := result(keyGlobex, globex, g1)
	waiting(2)

	// Cancelling a1 resolves it through the router: its tasks/result
	// answers and gives its slot back, which a2's tasks/result then takes.
	if m, _ := mcpPost(keyAcme, acme, "tasks/cancel", fmt.Sprintf(`{"taskId":%q}`, a1)); m["result"] == nil {
		t.Fatalf("tasks/cancel: %v", m)
	}
	select {
	case m := <-first:
		if r, _ := m["result"].(map[string]any); r == nil || r["isError"] != true {
			t.Fatalf("the cancelled task's tasks/result: %v", m)
		}
	case <-ctx.Done():
		t.Fatal("the cancelled task's tasks/result did not answer")
	}
	waiting(1)
	third := result(keyAcme, acme, a2)
	waiting(2)

	session(keyAcme) // acme's second session; its third is refused
	m, sid := mcpPost(keyAcme, "", "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"it","version":"1"}}`)
	e, _ = m["error"].(map[string]any)
	data, _ = e["data"].(map[string]any)
	if sid != "" || e == nil || data["reason"] != "mcp_sessions" || !strings.Contains(fmt.Sprint(e["message"]), `tenant "acme" already has 2 MCP sessions`) {
		t.Fatalf("acme's third session: %q %v", sid, m)
	}
	if v := scrape(t, httpAddr)[`switchboard_api_admission_refused_total{reason="mcp_sessions"}`]; v != 1 {
		t.Errorf("refused{mcp_sessions} = %v, want 1", v)
	}
	stop() // shutdown ends the waits
	for _, c := range []<-chan map[string]any{second, third} {
		select {
		case <-c:
		case <-ctx.Done():
			t.Fatal("a waiting tasks/result did not end at shutdown")
		}
	}
}
