//go:build integration && linux

package main

// A planned rebalance makes no duplicate under at_least_once (issue 16,
// handover): routers at steady load scale out (a second instance joins the
// group, the first gives partitions away) and stop gracefully (SIGTERM) in
// turn, as a rolling deploy does, and every intent gets exactly one result
// and, when it times out, exactly one timeout event, and no intent is
// dispatched twice. A crash may duplicate under at_least_once; a planned
// handover must not.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/intents/client"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/schemas"
)

const (
	handoverRate     = 300             // intents per second
	handoverStep     = 4 * time.Second // load between two handovers
	handoverIgnored  = 10              // every 10th intent the agent ignores: it times out
	handoverDrainFor = 90 * time.Second
	handoverLinger   = "300" // ms, the producers' linger.ms
)

func TestPlannedRebalanceMakesNoDuplicateApacheKafka(t *testing.T) {
	bootstrap := kafkaBootstrap(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "switchboard")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	prefix := "handover." + randomHex(4)
	cfgPath := filepath.Join(dir, "switchboard.yaml")
	// The chaos test's configuration, at_least_once, with producers that
	// linger: an acknowledgement takes handoverLinger, as on a loaded
	// broker, so that outputs are in flight when the group rebalances.
	cfg := strings.Replace(chaosConfig, `    heartbeat.interval.ms: "1000"`, `    heartbeat.interval.ms: "1000"`+"\n"+`    linger.ms: "`+handoverLinger+`"`, 1)
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, cfg, prefix, bootstrap, "at_least_once", chaosTimeout), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, bin, "topics", "create", "--config", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("switchboard topics create: %v\n%s", err, out)
	}
	routers := make([]*proc, 2)
	for i := range routers {
		id := fmt.Sprintf("router-%d", i+1)
		routers[i] = &proc{
			name: id, bin: bin, args: []string{"serve", "--config", cfgPath, "--instance-id", id},
			env: os.Environ(), logPath: filepath.Join(dir, id+".log"),
		}
	}
	agent := &proc{
		name: "agent", bin: bin, args: []string{"agent", "--config", cfgPath, "--name", "chaos", "--delay", chaosAgentDelay},
		env: os.Environ(), logPath: filepath.Join(dir, "agent.log"),
	}
	all := append(append([]*proc(nil), routers...), agent)
	defer func() {
		for _, p := range all {
			p.stop(30 * time.Second)
		}
		if t.Failed() {
			for _, p := range all {
				t.Logf("last lines of %s:\n%s", p.name, p.tail(40))
			}
		}
	}()
	results := watchTopic(ctx, bootstrap, prefix+".intent.result")
	up := func(r *proc) {
		t.Helper()
		if err := r.start(); err != nil {
			t.Fatal(err)
		}
		if err := r.waitLog(ctx, time.Minute, "partitions taken over"); err != nil {
			t.Fatal(err)
		}
	}
	up(routers[0])
	if err := agent.start(); err != nil {
		t.Fatal(err)
	}
	if err := agent.waitLog(ctx, time.Minute, "demo agent running"); err != nil {
		t.Fatal(err)
	}

	codec, err := schemas.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := client.NewPublisher(kafkaio.Settings{Bootstrap: bootstrap, ClientID: "switchboard-handover-load"}, codec, prefix+".intent.request")
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	// The load: handoverRate intents a second until the handovers are done.
	var (
		mu       sync.Mutex
		sent     = map[string]bool{} // acknowledged by the broker -> ignored by the agent
		failures atomic.Int64
		sends    sync.WaitGroup
	)
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		pace := time.NewTicker(10 * time.Millisecond)
		defer pace.Stop()
		start := time.Now()
		for n := 0; loadCtx.Err() == nil; {
			select {
			case <-loadCtx.Done():
			case <-pace.C:
				for due := int(time.Since(start).Seconds() * handoverRate); n < due; n++ {
					id, ignored := intents.NewID(), n%handoverIgnored == 0
					payload := fmt.Sprintf(`{"i":%d}`, n)
					if ignored {
						payload = fmt.Sprintf(`{"demo":{"ignore":true},"i":%d}`, n)
					}
					sends.Add(1)
					go func() {
						defer sends.Done()
						pctx, cancel := context.WithTimeout(ctx, time.Minute)
						defer cancel()
						if err := pub.Publish(pctx, &schemas.IntentRequest{IntentID: id, IntentType: "chaos", Payload: schemas.JSON(payload)}); err != nil {
							failures.Add(1)
							return
						}
						mu.Lock()
						sent[id] = ignored
						mu.Unlock()
					}()
				}
			}
		}
	}()
	pause := func() {
		select {
		case <-time.After(handoverStep):
		case <-ctx.Done():
		}
	}

	// The handovers, each at steady load: scale out, stop the first
	// gracefully, start it again, stop the second gracefully.
	began := time.Now()
	step := func(what string, do func()) {
		pause()
		do()
		t.Logf("%s at %s", what, time.Since(began).Round(100*time.Millisecond))
	}
	step("scale-out: router-2 joined and took partitions", func() { up(routers[1]) })
	step("router-1 stopped (SIGTERM)", func() {
		if !routers[0].stop(30 * time.Second) {
			t.Errorf("router-1 did not stop within 30s of SIGTERM")
		}
	})
	step("router-1 back: took partitions", func() { up(routers[0]) })
	step("router-2 stopped (SIGTERM)", func() {
		if !routers[1].stop(30 * time.Second) {
			t.Errorf("router-2 did not stop within 30s of SIGTERM")
		}
	})
	pause()
	stopLoad()
	<-loadDone
	sends.Wait()
	if n := failures.Load(); n > 0 {
		t.Errorf("%d publishes failed", n)
	}
	mu.Lock()
	ids := make([]string, 0, len(sent))
	for id := range sent {
		ids = append(ids, id)
	}
	mu.Unlock()
	each := func(yield func(string) bool) {
		for _, id := range ids {
			if !yield(id) {
				return
			}
		}
	}
	if err := waitUntil(ctx, handoverDrainFor, 250*time.Millisecond, func() bool { return results.lacking(each) == 0 }); err != nil {
		t.Errorf("%d of %d intents without a result %s after the load", results.lacking(each), len(ids), handoverDrainFor)
	}
	for _, p := range all {
		if !p.stop(30 * time.Second) {
			t.Errorf("%s did not stop within 30s of SIGTERM", p.name)
		}
	}

	// The verdict, from the topics read to their end.
	count := func(topic string) map[string]int {
		t.Helper()
		n := map[string]int{}
		if err := readToEnd(ctx, bootstrap, topic, func(m *kafka.Message) { n[string(m.Key)]++ }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	res, tos := count(prefix+".intent.result"), count(prefix+".intent.timeout")
	dispatches := count(prefix + ".agent.chaos.request")
	var missing, dupResults, dupTimeouts, missingTimeouts, dupDispatches int
	var examples []string
	for _, id := range ids {
		if n := dispatches[id]; n > 1 {
			dupDispatches += n - 1
		}
		switch n := res[id]; {
		case n == 0:
			missing++
		case n > 1:
			dupResults += n - 1
			examples = append(examples, fmt.Sprintf("%s: %d results", id, n))
		}
		switch n := tos[id]; {
		case n > 1:
			dupTimeouts += n - 1
			examples = append(examples, fmt.Sprintf("%s: %d timeout events", id, n))
		case n == 0 && sent[id]:
			missingTimeouts++
		}
	}
	sort.Strings(examples)
	t.Logf("handover: %d intents (%d ignored by the agent) over %s, 4 planned rebalances: missing results %d, duplicate results %d, duplicate timeout events %d, missing timeout events %d, second dispatches %d",
		len(ids), len(ids)/handoverIgnored, time.Since(began).Round(time.Second), missing, dupResults, dupTimeouts, missingTimeouts, dupDispatches)
	for _, r := range routers {
		t.Logf("%s: %s", r.name, strings.Join(handoverLines(r.log()), "; "))
	}
	if missing > 0 || missingTimeouts > 0 {
		t.Errorf("%d intents without a result, %d ignored intents without a timeout event", missing, missingTimeouts)
	}
	if dupDispatches > 0 {
		// An intent pending at the revocation has its waiting state written
		// first (router's saveStatesOf): its next owner restores it and
		// waits for the answer instead of dispatching it again.
		t.Errorf("a planned rebalance dispatched %d intents a second time (the agent did their work twice)", dupDispatches)
	}
	if dupResults > 0 || dupTimeouts > 0 {
		t.Errorf("a planned rebalance duplicated: %d second results, %d second timeout events; for example %s",
			dupResults, dupTimeouts, strings.Join(examples[:min(len(examples), 5)], ", "))
	}
}

// handoverLines are a router log's revocations and takeovers, shortened.
func handoverLines(log string) []string {
	var out []string
	for l := range strings.SplitSeq(log, "\n") {
		if strings.Contains(l, "partitions revoked") || strings.Contains(l, "partitions taken over") || strings.Contains(l, "outputs in flight") {
			if i := strings.Index(l, "msg="); i >= 0 {
				l = l[i:]
			}
			out = append(out, clip(l, 160))
		}
	}
	return out
}
