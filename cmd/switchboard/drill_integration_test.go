//go:build integration && linux

package main

// The three-broker drill of issue 21: two exactly_once routers and two demo
// agents under an open-loop load on a cluster of three Kafka nodes
// (deploy/kafka/kafka.sh cluster); one broker is killed with SIGKILL and
// brought back, then all three are restarted in turn, then a router is
// killed with SIGKILL. It reuses the chaos test's processes, watchers,
// topic reads and verdict (chaos_*_test.go) and adds the figures of
// drill_check_test.go. make drill starts the cluster, runs it and stops it.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// drillOptions, from the environment:
//
//	SWITCHBOARD_DRILL=1   run at all (make drill sets it)
//	KAFKA_BOOTSTRAP       the cluster kafka.sh cluster up started (with KAFKA_PORT and
//	                      SWITCHBOARD_KAFKA_DIR as it was started with: the drill drives it)
//	DRILL_RATE            intents per second (default 500)
//	DRILL_BEFORE          load before the broker kill (default 20s)
//	DRILL_BROKER_DOWN     how long the killed broker stays down (default 10s: the
//	                      controllers fence it after 9 s, the session timeout)
//	DRILL_AFTER           load after the router kill's restart (default 30s)
//	DRILL_LOG_DIR         keep the processes' logs there
//	DRILL_SHED_LATE       0: the agent's overload.shed_late is false (default 1: on, the default)
//	DRILL_TRACE           write a trace to this file: each router's answer-time estimate and
//	                      shed counts once a second, and how the intents of each second ended
type drillOptions struct {
	rate                      float64
	before, brokerDown, after time.Duration
	logDir                    string
	shedLate                  bool
}

const (
	drillTimeout     = 2 * time.Second // the intent type's timeout: the deadline
	drillNodes       = 3
	drillAgents      = 2
	drillRouterDown  = 10 * time.Second // a supervisor's restart delay
	drillMinLoad     = 90 * time.Second
	drillISRWithin   = 3 * time.Minute
	drillDrainWithin = 2 * time.Minute
)

func drillOptionsFromEnv(t *testing.T) drillOptions {
	t.Helper()
	o := drillOptions{rate: 500, before: 20 * time.Second, brokerDown: 10 * time.Second, after: 30 * time.Second, logDir: os.Getenv("DRILL_LOG_DIR"), shedLate: true}
	switch v := os.Getenv("DRILL_SHED_LATE"); v {
	case "", "1":
	case "0":
		o.shedLate = false
	default:
		t.Fatalf("DRILL_SHED_LATE=%q: want 0 or 1", v)
	}
	if v := os.Getenv("DRILL_RATE"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r <= 0 {
			t.Fatalf("DRILL_RATE=%q: want a positive number", v)
		}
		o.rate = r
	}
	for name, dst := range map[string]*time.Duration{"DRILL_BEFORE": &o.before, "DRILL_BROKER_DOWN": &o.brokerDown, "DRILL_AFTER": &o.after} {
		if v := os.Getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				t.Fatalf("%s=%q: want a duration like 20s", name, v)
			}
			*dst = d
		}
	}
	return o
}

const drillConfig = `# The drill's configuration (cmd/switchboard/drill_integration_test.go).
kafka:
  bootstrap_servers: %[2]s
  group_id: %[1]s.router
  properties:
    session.timeout.ms: "6000"
    heartbeat.interval.ms: "1000"
` + pipelineTopics + `  partitions: 6
  replication_factor: 3
agents:
  drill: {topic: %[1]s.agent.drill.request, overload: {shed_late: %[4]t}}
intents:
  drill:
    agent: drill
    timeout: %[3]s
    fallback:
      static: {fallback: true}
router:
  delivery: exactly_once
http:
  listen: 127.0.0.1:0
  auth:
    api_keys: [{name: drill, tenant: drill, key_sha256: 4809b6d2a8ffa977c0703d11e47b57bd57305fea5246d94c642615546724c3e0}]
log:
  level: info
`

// cluster drives deploy/kafka/kafka.sh cluster.
type cluster struct {
	script, bootstrap string
	admin             *kafka.AdminClient
}

// A node's start waits up to drillNodeReady for it to answer: on a host as
// busy as the shared one, a restarted JVM took more than kafka.sh's 120 s.
const drillNodeReady = 5 * time.Minute

func (c *cluster) run(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, c.script, append([]string{"cluster"}, args...)...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("KAFKA_READY_TIMEOUT=%d", int(drillNodeReady.Seconds())))
	out, err := cmd.CombinedOutput()
	if err != nil { // one line, so that make drill's filter keeps kafka.sh's words and the node's log tail
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return fmt.Errorf("drill: kafka.sh cluster %s: %w: %s", strings.Join(args, " "), err, strings.Join(lines[max(0, len(lines)-15):], " | "))
	}
	return nil
}

// underReplicated counts the partitions (of every topic, internal ones too)
// whose in-sync replicas are fewer than their replicas.
func (c *cluster) underReplicated(ctx context.Context) (int, error) {
	md, err := c.admin.GetMetadata(nil, true, 10_000)
	if err != nil {
		return 0, err
	}
	names := make([]string, 0, len(md.Topics))
	for n := range md.Topics {
		names = append(names, n)
	}
	res, err := c.admin.DescribeTopics(ctx, kafka.NewTopicCollectionOfTopicNames(names))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range res.TopicDescriptions {
		for _, p := range d.Partitions {
			if len(p.Isr) < len(p.Replicas) {
				n++
			}
		}
	}
	return n, nil
}

// awaitInSync waits until no partition is under-replicated.
func (c *cluster) awaitInSync(ctx context.Context) error {
	var last error
	n := -1
	err := waitUntil(ctx, drillISRWithin, 500*time.Millisecond, func() bool {
		qctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		n, last = c.underReplicated(qctx)
		return last == nil && n == 0
	})
	if err != nil {
		return fmt.Errorf("%d partitions still under-replicated after %s (last error: %v)", n, drillISRWithin, last)
	}
	return nil
}

// TestDrillThreeBrokers runs the drill and prints its report line.
func TestDrillThreeBrokers(t *testing.T) {
	if os.Getenv("SWITCHBOARD_DRILL") != "1" {
		t.Skip("SWITCHBOARD_DRILL is not 1: make drill starts a three-node cluster and runs the drill")
	}
	bootstrap := os.Getenv("KAFKA_BOOTSTRAP")
	if strings.Count(bootstrap, ",") != drillNodes-1 {
		t.Fatalf("KAFKA_BOOTSTRAP=%q: want the %d brokers of 'kafka.sh cluster up'", bootstrap, drillNodes)
	}
	o := drillOptionsFromEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	began := time.Now()
	say := func(format string, args ...any) {
		line := fmt.Sprintf("drill: t=%s ", time.Since(began).Round(100*time.Millisecond)) + fmt.Sprintf(format, args...)
		t.Log(line)
	}

	dir := t.TempDir()
	prefix := "drill." + randomHex(4)
	if o.logDir != "" {
		dir = filepath.Join(o.logDir, prefix)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "switchboard")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfgPath := filepath.Join(dir, "switchboard.yaml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, drillConfig, prefix, bootstrap, drillTimeout, o.shedLate), 0o644); err != nil {
		t.Fatal(err)
	}
	admin, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "enable.metrics.push": false})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	cl := &cluster{script: "../../deploy/kafka/kafka.sh", bootstrap: bootstrap, admin: admin}
	t.Cleanup(func() { // the cluster is left whole, as it was found
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer ccancel()
		for n := 1; n <= drillNodes; n++ {
			if err := cl.run(cctx, "start", strconv.Itoa(n)); err != nil {
				t.Errorf("starting node %d again after the drill: %v", n, err)
			}
		}
	})
	if out, err := exec.CommandContext(ctx, bin, "topics", "create", "--config", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("switchboard topics create: %v\n%s", err, out)
	}

	// Two routers, two agents.
	var routers, agents []*proc
	for i := 1; i <= 2; i++ {
		id := fmt.Sprintf("router-%d", i)
		routers = append(routers, &proc{name: id, bin: bin, args: []string{"serve", "--config", cfgPath, "--instance-id", id}, env: os.Environ(), logPath: filepath.Join(dir, id+".log")})
	}
	for i := 1; i <= drillAgents; i++ {
		name := fmt.Sprintf("agent-%d", i)
		agents = append(agents, &proc{name: name, bin: bin, args: []string{"agent", "--config", cfgPath, "--name", "drill", "--delay", chaosAgentDelay}, env: os.Environ(), logPath: filepath.Join(dir, name+".log")})
	}
	all := append(append([]*proc(nil), routers...), agents...)
	t.Cleanup(func() {
		for _, p := range all {
			p.stop(20 * time.Second)
			if t.Failed() {
				t.Logf("last lines of %s (%s):\n%s", p.name, p.logPath, p.tail(30))
			}
		}
	})
	topics := map[string]string{
		"requests": prefix + ".intent.request", "results": prefix + ".intent.result", "timeouts": prefix + ".intent.timeout",
		"dispatches": prefix + ".agent.drill.request", "responses": prefix + ".agent.response",
	}
	wctx, stopWatching := context.WithCancel(ctx)
	liveReq := watchTopic(wctx, bootstrap, topics["requests"])
	liveRes := watchTopic(wctx, bootstrap, topics["results"])
	defer func() {
		stopWatching()
		<-liveReq.done
		<-liveRes.done
	}()
	for _, p := range all {
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range routers {
		if err := r.waitLog(ctx, 2*time.Minute, "partitions taken over"); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range agents {
		if err := a.waitLog(ctx, time.Minute, "demo agent running"); err != nil {
			t.Fatal(err)
		}
	}
	codec, err := schemas.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := newDrillLoad(bootstrap, codec, topics["requests"], chaosSendWithin-30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	warm := make([]chaosIntent, chaosWarmup)
	var wg sync.WaitGroup
	for i := range warm {
		warm[i] = chaosIntent{id: intents.NewID(), payload: fmt.Sprintf(`{"warmup":%d}`, i), warmup: true}
		wg.Add(1)
		go func() {
			defer wg.Done()
			wctx, wcancel := context.WithTimeout(ctx, time.Minute)
			defer wcancel()
			warm[i].acked = pub.Publish(wctx, &schemas.IntentRequest{IntentID: warm[i].id, IntentType: "drill", Payload: schemas.JSON(warm[i].payload)}) == nil
		}()
	}
	wg.Wait()
	if err := waitUntil(ctx, time.Minute, 100*time.Millisecond, func() bool {
		return liveRes.lacking(idsOf(warm, func(in *chaosIntent) bool { return in.acked })) == 0
	}); err != nil {
		t.Fatal("the warm-up intents did not all get a result within a minute")
	}
	say("2 routers (exactly_once), %d agents, %d nodes (RF 3, min ISR 2) up; warm-up resolved; shed_late %t; logs in %s", drillAgents, drillNodes, o.shedLate, dir)
	trace, err := openTrace()
	if err != nil {
		t.Fatal(err)
	}
	if trace != nil {
		defer func() { _ = trace.Close() }()
	}

	// The load runs until the schedule is done.
	var (
		loadMu           sync.Mutex
		load             []chaosIntent
		sentAt           []int64
		acked, sendFails atomic.Int64
		sends            sync.WaitGroup
	)
	loadDone := make(chan struct{})
	loadStopped := make(chan struct{})
	loadStart := time.Now()
	stopTrace := func() {}
	if trace != nil {
		tctx, cancelTrace := context.WithCancel(ctx)
		traced := make(chan struct{})
		go func() { defer close(traced); traceRouters(tctx, trace, loadStart, routers) }()
		stopTrace = func() { cancelTrace(); <-traced }
		defer stopTrace()
	}
	go func() {
		defer close(loadStopped)
		pace := time.NewTicker(10 * time.Millisecond)
		defer pace.Stop()
		for {
			select {
			case <-loadDone:
				return
			case <-ctx.Done():
				return
			case <-pace.C:
			}
			due := int(o.rate * time.Since(loadStart).Seconds())
			loadMu.Lock()
			for len(load) < due {
				i := len(load)
				load = append(load, chaosIntent{id: intents.NewID(), payload: fmt.Sprintf(`{"i":%d}`, i)})
				sentAt = append(sentAt, time.Now().UnixMilli())
				in := &chaosIntent{id: load[i].id, payload: load[i].payload}
				sends.Add(1)
				go func() {
					defer sends.Done()
					sctx, scancel := context.WithTimeout(ctx, chaosSendWithin)
					defer scancel()
					if pub.Publish(sctx, &schemas.IntentRequest{IntentID: in.id, IntentType: "drill", Payload: schemas.JSON(in.payload)}) != nil {
						sendFails.Add(1)
						return
					}
					acked.Add(1)
					loadMu.Lock()
					load[i].acked = true
					loadMu.Unlock()
				}()
			}
			loadMu.Unlock()
		}
	}()
	sleepFor := func(d time.Duration) { // the schedule's waits: the workload, not a synchronisation
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	var events []string
	mark := func(what string) int64 {
		at := time.Now().UnixMilli()
		events = append(events, fmt.Sprintf("%s at t=%.1fs", what, float64(at-loadStart.UnixMilli())/1000))
		say("%s (results so far %d)", what, liveRes.total())
		return at
	}
	nodeUp := func(n int) {
		if err := cl.run(ctx, "start", strconv.Itoa(n)); err != nil {
			t.Fatal(err)
		}
		if err := cl.awaitInSync(ctx); err != nil {
			t.Fatal(err)
		}
	}

	sleepFor(o.before)
	killAt := mark("kill -9 broker 2")
	if err := cl.run(ctx, "kill", "2"); err != nil {
		t.Fatal(err)
	}
	sleepFor(o.brokerDown)
	mark("start broker 2")
	nodeUp(2)
	mark("broker 2 back in sync")
	rollFrom := time.Now()
	for n := 1; n <= drillNodes; n++ {
		mark(fmt.Sprintf("rolling restart: stop broker %d", n))
		if err := cl.run(ctx, "stop", strconv.Itoa(n)); err != nil {
			t.Fatal(err)
		}
		nodeUp(n)
		mark(fmt.Sprintf("rolling restart: broker %d back in sync", n))
	}
	rolling := time.Since(rollFrom)
	victim := routers[0]
	routerKillAt := mark("kill -9 " + victim.name)
	if err := victim.kill9(); err != nil {
		t.Fatal(err)
	}
	sleepFor(drillRouterDown)
	mark("start " + victim.name)
	if err := victim.start(); err != nil {
		t.Fatal(err)
	}
	afterFrom := time.Now().Add(10 * time.Second).UnixMilli()
	if left := drillMinLoad - time.Since(loadStart); left > o.after {
		o.after = left
	}
	sleepFor(o.after)
	close(loadDone)
	<-loadStopped
	loadEnd := time.Now().UnixMilli()
	sends.Wait()
	loadMu.Lock()
	sentLoad := append([]chaosIntent(nil), load...)
	loadMu.Unlock()
	say("load: %d intents at %.0f/s over %s; %d acknowledged, %d publishes failed", len(sentLoad), o.rate, time.Duration(loadEnd-loadStart.UnixMilli())*time.Millisecond, acked.Load(), sendFails.Load())

	entered := func(yield func(string) bool) {
		for i := range sentLoad {
			if (sentLoad[i].acked || liveReq.has(sentLoad[i].id)) && !yield(sentLoad[i].id) {
				return
			}
		}
	}
	if err := waitUntil(ctx, drillDrainWithin, 250*time.Millisecond, func() bool { return liveRes.lacking(entered) == 0 }); err != nil {
		t.Errorf("%d intents still without a result %s after the load", liveRes.lacking(entered), drillDrainWithin)
	}
	var stops sync.WaitGroup // all at once: each router's drain and commit is its own wait
	for _, p := range all {
		stops.Go(func() { p.stop(30 * time.Second) })
	}
	stops.Wait()
	stopTrace()
	var cpuRouters, cpuAgents time.Duration // what each kind of process cost the host, every incarnation
	for _, p := range routers {
		cpuRouters += p.cpu
	}
	for _, p := range agents {
		cpuAgents += p.cpu
	}
	var self syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	cpuHarness := time.Duration(self.Utime.Nano() + self.Stime.Nano())

	// The verdict (the chaos test's) and the figures.
	c := &chaosRun{t: t, o: chaosOptions{delivery: "exactly_once"}, v: chaosVariant{name: "drill"}, bootstrap: bootstrap, began: began}
	rd, err := c.readAll(ctx, topics)
	if err != nil {
		t.Fatal(err)
	}
	v := judge(append(append([]chaosIntent(nil), warm...), sentLoad...), rd.obs, "drill", nil)
	ins := make([]drillIntent, len(sentLoad))
	var seen []int64
	for i, in := range sentLoad {
		ins[i] = drillIntent{sentMs: sentAt[i], seenMs: liveRes.firstSeen(in.id)}
		if rs := rd.obs.results[in.id]; len(rs) > 0 {
			ins[i].outcome = string(rs[0].Outcome)
		}
		if ins[i].seenMs > 0 {
			seen = append(seen, ins[i].seenMs)
		}
	}
	f := figures(ins, drillTimeout, killAt, afterFrom, loadStart.UnixMilli(), loadEnd)
	rec, recovered := recovery(seen, killAt, loadEnd, o.rate, 3)
	recRouter, recoveredRouter := recovery(seen, routerKillAt, loadEnd, o.rate, 3)
	durOr := func(d time.Duration, ok bool) string {
		if !ok {
			return "never"
		}
		return d.String()
	}
	for _, e := range events {
		say("event: %s", e)
	}
	if trace != nil {
		for _, e := range events {
			fmt.Fprintf(trace, "event %s\n", e)
		}
		traceOutcomes(trace, ins, drillTimeout, loadStart.UnixMilli())
	}
	say("results by outcome: %v; timeout events by reason/fallback: %v", rd.byOutcome, rd.byReason)
	for _, p := range all {
		lines := logSummary(p.log())
		if len(lines) > 6 {
			lines = append(lines[:6], fmt.Sprintf("… %d more kinds", len(lines)-6))
		}
		for _, l := range lines {
			say("log %s: %s", p.name, l)
		}
	}
	for _, e := range v.exampleLines() {
		say("example %s", e)
	}
	load1, load5, _ := loadAverage()
	line := fmt.Sprintf("drill: intents=%d rate=%.0f/s timeout=%s missing=%d duplicate=%d answered_in_deadline=%s answered_late=%s fallback=%s other=%s within_120s=%s shed_late=%t"+
		" in_deadline_before/during/after=%s/%s/%s shed_before/during/after=%s/%s/%s"+
		" longest_gap=%s p99_before=%s p99_during=%s p99_after=%s recovery_broker_kill=%s recovery_router_kill=%s rolling_restart=%s"+
		" timeout_dups=%d timeout_missing=%d timeout_orphans=%d lost_acked=%d strays=%d wrong_outcome=%d paired_late=%d send_errors=%d cpu_routers=%s cpu_agents=%s cpu_harness=%s load_avg=%s/%s took=%s",
		v.Intents, o.rate, drillTimeout, v.Missing, v.Duplicate, share(f.AnsweredInDeadline), share(f.AnsweredLate), share(f.Fallback), share(f.Other), share(f.Within120s), o.shedLate,
		share(f.InDeadlineBy[0]), share(f.InDeadlineBy[1]), share(f.InDeadlineBy[2]), share(f.ShedBy[0]), share(f.ShedBy[1]), share(f.ShedBy[2]),
		f.LongestGap.Round(time.Millisecond), f.P99[0], f.P99[1], f.P99[2], durOr(rec, recovered), durOr(recRouter, recoveredRouter), rolling.Round(time.Second),
		v.TimeoutDups, v.TimeoutMissing, v.TimeoutOrphans, v.LostAcked, v.Strays, v.WrongOutcome, v.PairedLate, v.SendErrors, cpuRouters.Round(time.Second), cpuAgents.Round(time.Second), cpuHarness.Round(time.Second), load1, load5, time.Since(began).Round(time.Second))
	t.Log(line)
	fmt.Println(line)
	if v.Missing+v.Duplicate+v.TimeoutDups+v.TimeoutMissing+v.TimeoutOrphans+v.LostAcked+v.Strays > 0 {
		t.Errorf("the drill broke exactly one result per intent (examples above)")
	}
	if !recovered {
		t.Logf("note: results never flowed at %.0f/s for 3 s in a row after the broker kill", o.rate)
	}
}

// loadAverage reads /proc/loadavg: the report says how busy the host was.
func loadAverage() (string, string, string) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?", "?", "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?", "?", "?"
	}
	return f[0], f[1], f[2]
}
