//go:build integration && linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// mcpFailoverConfig: one partition, so that the instance that owns it takes
// every intent, and its kill -9 leaves the pending intent to the other (with
// several partitions the intent could sit on the survivor's from the start,
// and the kill would prove nothing). A lookup store each (%[3]s).
const mcpFailoverConfig = `kafka:
  bootstrap_servers: %[2]s
  group_id: %[1]s.router
  properties:
    session.timeout.ms: "6000"
` + shortTopics + `  partitions: 1
  auto_create: true
agents:
  slow: {topic: %[1]s.agent.slow, encoding: json, group_id: %[1]s.agent.slow}
intents:
  slow_job:
    agent: slow
    timeout: 3m
    description: a long job
    input_schema: {type: object, properties: {n: {type: string}}, required: [n]}
http:
  listen: 127.0.0.1:0
  lookup: {dir: %[3]s}
  auth: {mode: "off"}
`

// TestMCPClientsTaskFailoverOnKafka is issue 19's last "done when": the two
// official SDKs, nobody here wrote, each create a task on the instance that
// owns the intent, that instance is killed with SIGKILL, and the same SDK
// reads the task from the other instance: first still working (no agent
// runs yet, so nothing can have answered it), then, once the test starts
// the agent, completed with the agent's answer. The Python SDK (mcp 2.3.0)
// speaks 2026-07-28 and the tasks extension, the TypeScript SDK
// (@modelcontextprotocol/sdk 1.32.2) 2025-11-25 sessions and the
// experimental tasks/*; deploy/mcp/python_task_failover.py and
// ts_task_failover.mjs say which SDK calls they make. The killed instance
// is started again before the next SDK's turn.
//
// The clients are those deploy/mcp/install.sh installs (make setup; CI
// installs them before make check); without them the test fails.
func TestMCPClientsTaskFailoverOnKafka(t *testing.T) {
	bootstrap := apacheKafka(t)
	clients := mcpClients(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "switchboard")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	prefix := "mcpfailover." + randomHex(4)
	env := os.Environ()
	config := func(name string) string { return filepath.Join(dir, name+".yaml") }
	serve := func(name string) *lookupNode {
		cfg := config(name)
		if err := os.WriteFile(cfg, fmt.Appendf(nil, mcpFailoverConfig, prefix, bootstrap, filepath.Join(dir, "lookup-"+name)), 0o600); err != nil {
			t.Fatal(err)
		}
		return &lookupNode{t: t, proc: &proc{
			name: name, bin: bin, env: env, logPath: filepath.Join(dir, name+".log"),
			args: []string{"serve", "--config", cfg, "--insecure-no-auth", "--instance-id", name},
		}}
	}
	nodes := []*lookupNode{serve("mcp-a"), serve("mcp-b")}
	agent := &proc{
		name: "agent", bin: bin, env: env, logPath: filepath.Join(dir, "agent.log"),
		args: []string{"agent", "--config", config("mcp-a"), "--name", "slow", "--brokers", bootstrap},
	}
	defer func() {
		for _, p := range []*proc{nodes[0].proc, nodes[1].proc, agent} {
			p.stop(10 * time.Second)
			if t.Failed() {
				t.Logf("%s log (tail):\n%s", p.name, p.tail(30))
			}
		}
	}()
	for _, n := range nodes {
		n.start(ctx)
	}

	for i, c := range clients {
		owner, other := requestOwner(ctx, t, bootstrap, prefix, nodes)
		nonce := c.name + "-" + randomHex(4)
		out := c.run(ctx, t, "create", owner.base+"/mcp", nonce)
		m := regexp.MustCompile(`(?m)^task (mcp-\S+)$`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("%s: the create step printed no task id", c.name)
		}
		id := m[1]
		if err := owner.proc.kill9(); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: task %s created on %s, which owned the intent; %s killed with SIGKILL", c.name, id, owner.proc.name, owner.proc.name)
		c.run(ctx, t, "pending", other.base+"/mcp", id)
		if err := agent.start(); err != nil {
			t.Fatal(err)
		}
		c.run(ctx, t, "result", other.base+"/mcp", id, nonce)
		t.Logf("%s: task %s answered by %s after %s's kill -9", c.name, id, other.proc.name, owner.proc.name)
		agent.stop(10 * time.Second)
		if i < len(clients)-1 {
			owner.start(ctx)
		}
	}
}

// requestOwner waits until the router group is stable with both instances
// in it and one of them owns the requests topic's partition, and returns
// that one and the other.
func requestOwner(ctx context.Context, t *testing.T, bootstrap, prefix string, nodes []*lookupNode) (owner, other *lookupNode) {
	t.Helper()
	admin, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": bootstrap})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var last string
	err = waitUntil(ctx, 2*time.Minute, 250*time.Millisecond, func() bool {
		res, err := admin.DescribeConsumerGroups(ctx, []string{prefix + ".router"})
		if err != nil || len(res.ConsumerGroupDescriptions) != 1 {
			last = fmt.Sprint(err)
			return false
		}
		g := res.ConsumerGroupDescriptions[0]
		last = fmt.Sprintf("state %s, %d members", g.State, len(g.Members))
		if g.State != kafka.ConsumerGroupStateStable || len(g.Members) != len(nodes) {
			return false
		}
		for _, mb := range g.Members {
			for _, tp := range mb.Assignment.TopicPartitions {
				if tp.Topic == nil || *tp.Topic != prefix+".request" {
					continue
				}
				for i, n := range nodes {
					if n.proc.name == mb.GroupInstanceID {
						owner, other = n, nodes[1-i]
					}
				}
			}
		}
		return owner != nil
	})
	if err != nil {
		t.Fatalf("the router group never settled with an owner of %s.request: %v (last: %s)", prefix, err, last)
	}
	return owner, other
}

// mcpClient runs one SDK's steps of the failover scenario.
type mcpClient struct {
	name    string
	command func(ctx context.Context, args ...string) *exec.Cmd
}

// run runs one step, logs every line it prints, fails the test when it
// fails, and returns its output.
func (c mcpClient) run(ctx context.Context, t *testing.T, step string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := c.command(ctx, append([]string{step}, args...)...)
	out, err := cmd.CombinedOutput()
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		t.Logf("%s %s: %s", c.name, step, sc.Text())
	}
	if err != nil {
		t.Fatalf("%s %s: %v", c.name, step, err)
	}
	return string(out)
}

// mcpClients returns the Python and the TypeScript SDK as
// deploy/mcp/install.sh installs them (SWITCHBOARD_MCP_CHECKS, default
// ~/.cache/switchboard/mcp-checks), and fails the test when they are not.
func mcpClients(t *testing.T) []mcpClient {
	t.Helper()
	dir := os.Getenv("SWITCHBOARD_MCP_CHECKS")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(home, ".cache", "switchboard", "mcp-checks")
	}
	python, node := filepath.Join(dir, "venv", "bin", "python"), filepath.Join(dir, "node_modules", ".bin", "node")
	sdk := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")
	for _, p := range []string{python, node, sdk} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the MCP clients are not installed in %s (no %s): run 'make setup' (deploy/mcp/install.sh)", dir, filepath.Base(p))
		}
	}
	mcpDir, err := filepath.Abs(filepath.Join("..", "..", "deploy", "mcp"))
	if err != nil {
		t.Fatal(err)
	}
	// Node resolves the SDK from the script's directory: a copy of the
	// script beside a link to the installed node_modules.
	tsDir := t.TempDir()
	script, err := os.ReadFile(filepath.Join(mcpDir, "ts_task_failover.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tsDir, "ts_task_failover.mjs"), script, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "node_modules"), filepath.Join(tsDir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	return []mcpClient{
		{name: "python", command: func(ctx context.Context, args ...string) *exec.Cmd {
			return exec.CommandContext(ctx, python, append([]string{filepath.Join(mcpDir, "python_task_failover.py")}, args...)...)
		}},
		{name: "typescript", command: func(ctx context.Context, args ...string) *exec.Cmd {
			return exec.CommandContext(ctx, node, append([]string{filepath.Join(tsDir, "ts_task_failover.mjs")}, args...)...)
		}},
	}
}
