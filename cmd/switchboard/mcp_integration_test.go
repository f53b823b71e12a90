//go:build integration && linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const mcpServeConfig = `kafka:
  bootstrap_servers: %[2]s
  group_id: %[1]s.router
  properties:
    session.timeout.ms: "6000"
` + shortTopics + `  partitions: 3
  auto_create: true
agents:
  slow: {topic: %[1]s.agent.slow, encoding: json}
intents:
  slow_job:
    agent: slow
    timeout: 60s
    description: a long job
    input_schema: {type: object, properties: {n: {type: string}}, required: [n]}
http:
  listen: 127.0.0.1:0
  auth: {mode: off}
`

// TestMCPTaskOnKafka creates a task on /mcp of one 'switchboard serve'
// (2026-07-28, the tasks extension), kills that instance with SIGKILL at
// once, and reads the task's result from the other instance: the intent's
// partitions move to it, it restores the pending intent, pairs the agent's
// answer and resolves it, and its tasks/get answers completed with the
// result. tasks/get of a task still pending on another instance, and after
// restarts, go through the lookup store (issue 17):
// TestMCPTasksAnsweredByAnyInstanceEmbedded and the lookup test on Kafka.
func TestMCPTaskOnKafka(t *testing.T) {
	bootstrap := apacheKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "switchboard")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "switchboard.yaml")
	prefix := "mcptask." + randomHex(4)
	if err := os.WriteFile(cfg, fmt.Appendf(nil, mcpServeConfig, prefix, bootstrap), 0o600); err != nil {
		t.Fatal(err)
	}
	env := os.Environ()
	newProc := func(name string, args ...string) *proc {
		return &proc{name: name, bin: bin, args: args, env: env, logPath: filepath.Join(dir, name+".log")}
	}
	a := newProc("serve-a", "serve", "--config", cfg, "--insecure-no-auth", "--instance-id", "mcp-a")
	b := newProc("serve-b", "serve", "--config", cfg, "--insecure-no-auth", "--instance-id", "mcp-b")
	agent := newProc("agent", "agent", "--config", cfg, "--name", "slow", "--brokers", bootstrap, "--delay", "4s")
	for _, p := range []*proc{a, b, agent} {
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
		defer p.stop(10 * time.Second)
	}
	defer func() {
		if t.Failed() {
			for _, p := range []*proc{a, b, agent} {
				t.Logf("%s log (tail):\n%s", p.name, p.tail(40))
			}
		}
	}()
	addr := func(p *proc) string {
		t.Helper()
		if err := p.waitLog(ctx, time.Minute, "api listening"); err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`"api listening" addr=(\S+)`).FindStringSubmatch(p.log())
		if m == nil {
			t.Fatalf("%s: no api address in its log", p.name)
		}
		return "http://" + m[1] + "/mcp"
	}
	urlA, urlB := addr(a), addr(b)
	for _, u := range []string{urlA, urlB} {
		eventually(t, "both instances ready", func() bool {
			resp, err := http.Get(strings.TrimSuffix(u, "/mcp") + "/readyz")
			if err != nil {
				return false
			}
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}

	const ext = `"extensions":{"io.modelcontextprotocol/tasks":{}}`
	call := func(url, method, name, params string) map[string]any {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":"` + randomHex(4) + `","method":"` + method + `","params":{` + params +
			`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{` + ext + `}}}}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		for k, v := range map[string]string{
			"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcp-Name": name,
		} {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil // the instance is gone
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		s := string(b)
		if i := strings.Index(s, "data: {"); i >= 0 { // SSE
			s = strings.SplitN(s[i+6:], "\n", 2)[0]
		}
		var m map[string]any
		_ = json.Unmarshal([]byte(s), &m)
		return m
	}
	created := call(urlA, "tools/call", "slow_job", `"name":"slow_job","arguments":{"n":"survives"}`)
	task, _ := created["result"].(map[string]any)
	id, _ := task["taskId"].(string)
	if task["resultType"] != "task" || !strings.HasPrefix(id, "mcp-") {
		t.Fatalf("create: %v", created)
	}
	if err := a.kill9(); err != nil {
		t.Fatal(err)
	}
	t.Logf("task %s created on A; A killed", id)
	var last map[string]any
	eventually(t, "B to answer the task completed", func() bool {
		last = call(urlB, "tasks/get", id, `"taskId":"`+id+`"`)
		r, _ := last["result"].(map[string]any)
		return r != nil && r["status"] == "completed"
	})
	r := last["result"].(map[string]any)
	b2, _ := json.Marshal(r["result"])
	if !strings.Contains(string(b2), "survives") {
		t.Fatalf("the task's result: %s", b2)
	}
	t.Logf("mcp: task %s answered completed by B after A's kill -9: %s", id, b2)
}
