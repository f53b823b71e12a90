//go:build integration

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/router/deadletter"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// dlqConfig is the configuration of TestDLQRepairWithoutCode: %[1]s the
// topic prefix, %[2]s the bootstrap servers, %[3]s the agent's name, %[4]s
// extra intent types.
const dlqConfig = `kafka:
  bootstrap_servers: %[2]s
  group_id: %[1]s.router
  properties:
    session.timeout.ms: "6000"
    heartbeat.interval.ms: "1000"
` + pipelineTopics + `  partitions: 1
  auto_create: true
agents:
  %[3]s: {topic: %[1]s.agent.%[3]s.request}
intents:
  echo: {agent: %[3]s, timeout: 5s}
%[4]shttp:
  listen: 127.0.0.1:0
  auth: {mode: off} # the API is not used
log:
  level: warn
`

// TestDLQRepairWithoutCode is "repair poison records without writing code"
// on real Kafka: a malformed request and a request of an intent type the
// router does not know land in the dead-letter topic; 'dlq list' says why;
// the router is restarted with a configuration that knows the type; 'dlq
// replay' puts the second record back by its position; the intent is then
// answered. Nothing else is reprocessed: the dead-letter topic still holds
// two records, and the answer came after the replay.
func TestDLQRepairWithoutCode(t *testing.T) {
	bootstrap := apacheKafka(t)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var b [4]byte
	_, _ = rand.Read(b[:])
	prefix, agent := "dlq."+hex.EncodeToString(b[:]), "sum"+hex.EncodeToString(b[:])
	dir := t.TempDir()
	v1, v2 := filepath.Join(dir, "v1.yaml"), filepath.Join(dir, "v2.yaml")
	for path, extra := range map[string]string{
		v1: "",
		v2: fmt.Sprintf("  summarize: {agent: %s, timeout: 20s}\n", agent),
	} {
		if err := os.WriteFile(path, fmt.Appendf(nil, dlqConfig, prefix, bootstrap, agent, extra), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	requests, results, dlq := prefix+".intent.request", prefix+".intent.result", prefix+".intent.dlq"

	cli := func(args ...string) (stdout, stderr string) {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(ctx, args, &out, &errOut); code != 0 {
			t.Fatalf("switchboard %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out.String(), errOut.String())
		}
		return out.String(), errOut.String()
	}
	// background runs a long-lived subcommand until the returned stop is
	// called, and fails the test if it exits otherwise than cleanly.
	background := func(args ...string) (stop func()) {
		bctx, bcancel := context.WithCancel(ctx)
		var logs syncBuffer
		done := make(chan int, 1)
		go func() { done <- run(bctx, args, &logs, &logs) }()
		stopped := false
		stop = func() {
			if stopped {
				return
			}
			stopped = true
			bcancel()
			if code := <-done; code != 0 {
				t.Errorf("switchboard %s: exit %d\n%s", strings.Join(args, " "), code, logs.String())
			}
		}
		t.Cleanup(stop)
		return stop
	}

	// Two poison records: one the router cannot read at all, one of an
	// intent type it does not know. The second goes through 'send', as a
	// caller would publish it.
	p, err := kafkaio.NewProducer(kafkaio.Settings{Bootstrap: bootstrap})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(5 * time.Second)
	cli("topics", "create", "--config", v1)
	if err := p.Send(ctx, requests, []byte("broken-1"), []byte(`{"intent_type": "echo", "payload": `), nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	id := intents.NewID()
	cli("send", "--config", v1, "--type", "summarize", "--id", id, "--payload", `{"text":"a long report"}`)

	stopV1 := background("serve", "--insecure-no-auth", "--config", v1)
	var listed []deadletter.Position
	eventually(t, "two dead letters", func() bool {
		out, _ := cli("dlq", "list", "--config", v1, "--json")
		listed = listed[:0]
		for line := range strings.Lines(out) {
			var l struct {
				Partition int32 `json:"partition"`
				Offset    int64 `json:"offset"`
			}
			if json.Unmarshal([]byte(line), &l) == nil {
				listed = append(listed, deadletter.Position{Partition: l.Partition, Offset: l.Offset})
			}
		}
		return len(listed) >= 2
	})
	stopV1()

	table, _ := cli("dlq", "list", "--config", v1)
	for _, want := range []string{
		"malformed_json", requests + "[0]@0", "broken-1",
		"unroutable", `no route for intent type "summarize"`, id,
	} {
		if !strings.Contains(table, want) {
			t.Errorf("dlq list lacks %q:\n%s", want, table)
		}
	}
	out, _ := cli("dlq", "list", "--config", v1, "--class", "unroutable", "--json")
	var poison struct {
		Partition int32                           `json:"partition"`
		Offset    int64                           `json:"offset"`
		Key       string                          `json:"key"`
		Error     struct{ Class, Message string } `json:"error"`
	}
	if n := strings.Count(out, "\n"); n != 1 {
		t.Fatalf("--class unroutable listed %d records, want 1:\n%s", n, out)
	}
	if err := json.Unmarshal([]byte(out), &poison); err != nil || poison.Key != id || poison.Error.Class != "unroutable" {
		t.Fatalf("the unroutable letter: %+v (%v)", poison, err)
	}
	at := fmt.Sprintf("%d:%d", poison.Partition, poison.Offset)

	// The fix is configuration only: v2 routes summarize to an agent.
	background("serve", "--insecure-no-auth", "--config", v2)
	background("agent", "--config", v2, "--name", agent)
	dry, _ := cli("dlq", "replay", "--config", v2, "--offsets", at, "--dry-run")
	if !strings.Contains(dry, "would replay 1 record(s)") || !strings.Contains(dry, "would go to: "+requests) {
		t.Fatalf("dry run:\n%s", dry)
	}
	replayedAt := time.Now()
	done, _ := cli("dlq", "replay", "--config", v2, "--offsets", at)
	if strings.TrimSpace(done) != "dlq: replayed 1 record(s) to "+requests {
		t.Fatalf("replay printed %q", done)
	}

	// The intent is answered, after the replay; it had been rejected
	// before it.
	s := kafkaio.Settings{Bootstrap: bootstrap}
	codec, err := schemas.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []schemas.Outcome
	var answered *schemas.IntentResult
	found := errors.New("found")
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	err = kafkaio.Read(wctx, s, kafkaio.Reading{Topics: []string{results}, From: kafkaio.FromBeginning()}, func(rec *port.Record) error {
		var r schemas.IntentResult
		if string(rec.Key) != id || codec.Decode(rec.Value, &r) != nil {
			return nil
		}
		outcomes = append(outcomes, r.Outcome)
		if r.Outcome == schemas.OutcomeAnswered {
			answered = &r
			return found
		}
		return nil
	})
	if !errors.Is(err, found) {
		t.Fatalf("no answered result for %s after the replay (%v); outcomes %v", id, err, outcomes)
	}
	if len(outcomes) != 2 || outcomes[0] != schemas.OutcomeRejected {
		t.Fatalf("outcomes %v, want rejected then answered", outcomes)
	}
	if answered.Timeline.ReceivedAt < replayedAt.UnixMilli() {
		t.Fatalf("answered intent received at %d, before the replay at %d: the router reprocessed the original", answered.Timeline.ReceivedAt, replayedAt.UnixMilli())
	}

	// The copy on the requests topic says where it came from and carries
	// none of the dead-letter headers.
	var copyHeaders []port.Header
	err = kafkaio.Read(wctx, s, kafkaio.Reading{Topics: []string{requests}, From: kafkaio.FromBeginning()}, func(rec *port.Record) error {
		for _, h := range rec.Headers {
			if h.Key == deadletter.HeaderReplayedFrom {
				copyHeaders = rec.Headers
				return found
			}
		}
		return nil
	})
	if !errors.Is(err, found) {
		t.Fatalf("no replayed record on %s: %v", requests, err)
	}
	for _, h := range copyHeaders {
		if strings.HasPrefix(h.Key, "switchboard.error.") || strings.HasPrefix(h.Key, "switchboard.original.") ||
			(h.Key == deadletter.HeaderReplayedFrom && string(h.Value) != dlq+"/"+strings.ReplaceAll(at, ":", "/")) {
			t.Fatalf("replayed headers %v", copyHeaders)
		}
	}
	// Nothing was dead-lettered again: the malformed record was not read
	// a second time.
	all, _ := cli("dlq", "list", "--config", v2, "--json")
	if n := strings.Count(all, "\n"); n != 2 {
		t.Fatalf("the dead-letter topic holds %d records after the replay, want 2:\n%s", n, all)
	}
	line := fmt.Sprintf("dlq: prefix=%s dead_letters=%d classes=malformed_json,unroutable replayed=1 replayed_from=%s outcomes=%v answered_after_replay=%dms elapsed=%s",
		prefix, len(listed), at, outcomes, answered.Timeline.ResolvedAt-replayedAt.UnixMilli(), time.Since(began).Round(100*time.Millisecond))
	t.Log(line)
}
