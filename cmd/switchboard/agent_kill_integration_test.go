//go:build integration && linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

const agentKillConfig = `# TestAgentKilledMidWorkLosesNothing's configuration.
kafka:
  bootstrap_servers: %[2]s
  properties:
    session.timeout.ms: "6000"
    heartbeat.interval.ms: "1000"
topics:
  responses: %[1]s.agent.response
agents:
  kill: {topic: %[1]s.agent.kill.request, group_id: %[1]s.agent.kill}
intents:
  kill: {agent: kill}
`

// TestAgentKilledMidWorkLosesNothing: a 'switchboard agent' killed with
// SIGKILL while its slow handler holds requests it has read leaves them
// uncommitted, and once it is started again every request on its topic gets
// an answer (at least once: some twice).
//
// Partition 0 holds ten slow requests, then a quick one; partition 1 one
// quick one. The first incarnation runs with --delay 1h, so the slow ones
// are in hand and unanswered; the quick ones (a delay_ms 0 directive)
// answered say it has read everything. Once the group's committed offset on
// partition 1 moved (a commit round went by, which commits partition 0 too)
// it is killed. The second runs with --delay 0 and must answer the ten.
// With the runner's old automatic commits, the round committed partition 0
// past the slow ones (offset 11) and the second incarnation never saw them.
func TestAgentKilledMidWorkLosesNothing(t *testing.T) {
	bootstrap := apacheKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "switchboard")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	prefix := fmt.Sprintf("agentkill-%d", time.Now().UnixNano())
	requests, responses, group := prefix+".agent.kill.request", prefix+".agent.response", prefix+".agent.kill"
	cfgPath := filepath.Join(dir, "switchboard.yaml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, agentKillConfig, prefix, bootstrap), 0o644); err != nil {
		t.Fatal(err)
	}
	s := kafkaio.Settings{Bootstrap: bootstrap}
	if _, err := kafkaio.CreateTopics(ctx, s, []kafkaio.TopicSpec{
		{Name: requests, Partitions: 2, ReplicationFactor: 1},
		{Name: responses, Partitions: 1, ReplicationFactor: 1},
	}); err != nil {
		t.Fatal(err)
	}
	codec, err := schemas.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	p, err := kafkaio.NewProducer(s)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(5 * time.Second)
	deadline := time.Now().Add(10 * time.Minute).UnixMilli()
	send := func(partition int32, id, payload string) {
		t.Helper()
		v, err := codec.Encode(requests, &schemas.AgentRequest{IntentID: id, IntentType: "kill", Agent: "kill", Payload: schemas.JSON(payload), Deadline: deadline, Attempt: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.SendTo(ctx, requests, partition, []byte(id), v, nil, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	var all []string
	for i := range 10 {
		id := fmt.Sprintf("slow-%d", i)
		send(0, id, `{}`)
		all = append(all, id)
	}
	send(0, "quick-0", `{"demo":{"delay_ms":0}}`)
	send(1, "quick-1", `{"demo":{"delay_ms":0}}`)
	all = append(all, "quick-0", "quick-1")

	agent := &proc{
		name: "agent", bin: bin, args: []string{"agent", "--config", cfgPath, "--name", "kill", "--delay", "1h"},
		env: os.Environ(), logPath: filepath.Join(dir, "agent.log"),
	}
	t.Cleanup(func() {
		agent.stop(30 * time.Second)
		if t.Failed() {
			t.Logf("agent log (%s):\n%s", agent.logPath, agent.tail(60))
		}
	})
	if err := agent.start(); err != nil {
		t.Fatal(err)
	}
	answered := func(ids ...string) {
		t.Helper()
		if missing := awaitAnswers(ctx, t, s, responses, 3*time.Minute, ids); len(missing) > 0 {
			t.Fatalf("no answer for %v on %s", missing, responses)
		}
	}
	answered("quick-0", "quick-1") // the agent has read both partitions to their end

	lagAdmin, err := kafkaio.NewLagAdmin(s)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lagAdmin.Close() }()
	var committed map[int32]int64
	if err := waitUntil(ctx, time.Minute, 200*time.Millisecond, func() bool {
		committed, err = lagAdmin.Committed(ctx, group, requests, []int32{0, 1})
		return err == nil && committed[1] >= 1
	}); err != nil {
		t.Fatalf("no commit round of the agent's group within a minute (last read: %v, %v)", committed, err)
	}
	t.Logf("committed before the kill: partition 0 at %d (the ten slow requests are offsets 0-9), partition 1 at %d", committed[0], committed[1])
	if err := agent.kill9(); err != nil {
		t.Fatal(err)
	}

	agent.args = []string{"agent", "--config", cfgPath, "--name", "kill", "--delay", "0"}
	if err := agent.start(); err != nil {
		t.Fatal(err)
	}
	answered(all...)
	if !agent.stop(30 * time.Second) {
		t.Fatal("the restarted agent did not stop within 30 s of SIGTERM")
	}
}

// awaitAnswers reads the responses topic from its start until every id has
// an answer or within passes, and returns the ids still without one.
func awaitAnswers(ctx context.Context, t *testing.T, s kafkaio.Settings, topic string, within time.Duration, ids []string) []string {
	t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	found := errors.New("found")
	err := kafkaio.Read(ctx, s, kafkaio.Reading{Topics: []string{topic}, From: kafkaio.FromBeginning()}, func(rec *port.Record) error {
		delete(want, string(rec.Key))
		if len(want) == 0 {
			return found
		}
		return nil
	})
	if err != nil && !errors.Is(err, found) && ctx.Err() == nil {
		t.Fatalf("reading %s: %v", topic, err)
	}
	var missing []string
	for id := range want {
		missing = append(missing, id)
	}
	slices.Sort(missing)
	return missing
}
