//go:build integration && linux

package main

// The chaos test of issue 4: "An intent that entered Kafka gets exactly one
// result, and, when it times out, exactly one timeout event, whatever happens
// to router instances or to the broker." Linux only: it signals processes,
// sets Pdeathsig and drives deploy/kafka/kafka.sh.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/intents/client"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// chaosOptions is the run's shape, from the environment:
//
//	SWITCHBOARD_CHAOS=1         run at all (otherwise it skips; make test-integration and make chaos set it)
//	KAFKA_BOOTSTRAP             the broker (required)
//	CHAOS_DELIVERY              router.delivery: exactly_once (default) or at_least_once
//	CHAOS_INTENTS               intents published over the run (default 20000)
//	CHAOS_DURATION              how long the load lasts (default 60s)
//	CHAOS_KILL_EVERY            kill -9 a router this often during the load; 0: never (default 10s)
//	CHAOS_BROKER_RESTART        unset: both variants; true: only kill-and-broker-restart; false: only kill-only
//	CHAOS_BROKER_DOWN           how long the broker stays down beyond its stop and start (default 0)
//	CHAOS_SEED                  seed of the victims' choice (default: random, printed)
//	CHAOS_LOG_DIR               keep the processes' logs there (default: a temporary directory)
//
// For example, both variants at full size against the broker kafka.sh runs:
//
//	eval "$(deploy/kafka/kafka.sh up)"
//	SWITCHBOARD_CHAOS=1 go test -tags integration -run TestChaosExactlyOnce -v -timeout 20m ./cmd/switchboard
//
// and a quick check of the harness, no kills, at_least_once (it must pass):
//
//	SWITCHBOARD_CHAOS=1 CHAOS_DELIVERY=at_least_once CHAOS_INTENTS=2000 CHAOS_DURATION=10s \
//	  CHAOS_KILL_EVERY=0 CHAOS_BROKER_RESTART=false go test -tags integration -run TestChaosExactlyOnce -v ./cmd/switchboard
//
// The broker-restart variant restarts the broker with deploy/kafka/kafka.sh
// (KAFKA_PORT is taken from KAFKA_BOOTSTRAP; KAFKA_CONTROLLER_PORT and
// SWITCHBOARD_KAFKA_DIR from the environment), so it needs the broker that
// script runs, and stops every other client of it for a few seconds.
type chaosOptions struct {
	delivery  string
	intents   int
	duration  time.Duration
	killEvery time.Duration
	downFor   time.Duration
	variants  []chaosVariant
	seed      uint64
	logDir    string
}

type chaosVariant struct {
	name          string
	brokerRestart bool
}

const (
	chaosRouters     = 3
	chaosTimeout     = 2 * time.Second // the chaos intent type's timeout
	chaosAgentDelay  = "50ms"
	chaosWarmup      = 30
	chaosDrainWithin = 2 * time.Minute // for every result, after the load
	chaosSendWithin  = 150 * time.Second
	// chaosRecovery is added to a broker outage: how long clients may take
	// to reconnect (librdkafka's reconnect backoff tops at 10s).
	chaosRecovery = 15 * time.Second
)

func chaosOptionsFromEnv(t *testing.T) chaosOptions {
	t.Helper()
	o := chaosOptions{
		delivery: "exactly_once", intents: 20000, duration: 60 * time.Second, killEvery: 10 * time.Second,
		seed: rand.Uint64(), logDir: os.Getenv("CHAOS_LOG_DIR"),
	}
	if v := os.Getenv("CHAOS_DELIVERY"); v != "" {
		o.delivery = v
	}
	num := func(name string, dst *int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				t.Fatalf("%s=%q: want a positive number", name, v)
			}
			*dst = n
		}
	}
	dur := func(name string, dst *time.Duration, zeroOK bool) {
		if v := os.Getenv(name); v != "" {
			if v == "0" && zeroOK {
				*dst = 0
				return
			}
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || (d == 0 && !zeroOK) {
				t.Fatalf("%s=%q: want a duration like 10s", name, v)
			}
			*dst = d
		}
	}
	num("CHAOS_INTENTS", &o.intents)
	dur("CHAOS_DURATION", &o.duration, false)
	dur("CHAOS_KILL_EVERY", &o.killEvery, true)
	dur("CHAOS_BROKER_DOWN", &o.downFor, true)
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: want a number", v)
		}
		o.seed = s
	}
	killOnly, withBroker := chaosVariant{"kill-only", false}, chaosVariant{"kill-and-broker-restart", true}
	switch v := strings.ToLower(os.Getenv("CHAOS_BROKER_RESTART")); v {
	case "", "both":
		o.variants = []chaosVariant{killOnly, withBroker}
	case "1", "true", "yes", "only":
		o.variants = []chaosVariant{withBroker}
	case "0", "false", "no":
		o.variants = []chaosVariant{killOnly}
	default:
		t.Fatalf("CHAOS_BROKER_RESTART=%q: want true, false or both (unset)", v)
	}
	return o
}

// TestChaosExactlyOnce runs three 'switchboard serve' processes and one demo
// agent against a real broker, publishes an open-loop load, kills a router
// with SIGKILL every CHAOS_KILL_EVERY (and, in the second variant, restarts
// the broker once mid-load), then reads the results and timeouts topics and
// checks that every intent that entered Kafka has exactly one result and, if
// it timed out, exactly one timeout event. See chaosOptions for the knobs and
// judge for the rules.
func TestChaosExactlyOnce(t *testing.T) {
	if os.Getenv("SWITCHBOARD_CHAOS") != "1" {
		t.Skip("SWITCHBOARD_CHAOS is not 1: make test-integration and make chaos set it")
	}
	bootstrap := apacheKafka(t)
	o := chaosOptionsFromEnv(t)
	perVariant := o.duration + 4*time.Minute
	if dl, ok := t.Deadline(); ok && time.Until(dl) < time.Duration(len(o.variants))*perVariant {
		t.Fatalf("go test -timeout leaves %s; the chaos test needs up to %s per variant (%d variants): run it with -timeout %s",
			time.Until(dl).Round(time.Second), perVariant, len(o.variants), (time.Duration(len(o.variants))*perVariant + time.Minute).Round(time.Minute))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	bin := filepath.Join(t.TempDir(), "switchboard")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput()
	cancel()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, v := range o.variants {
		t.Run(v.name, func(t *testing.T) { runChaos(t, bin, bootstrap, o, v) })
	}
}

// chaosRun is one variant's state.
type chaosRun struct {
	t         *testing.T
	o         chaosOptions
	v         chaosVariant
	bootstrap string
	dir       string
	cfgPath   string
	prefix    string
	began     time.Time
}

// say reports a line in go test -v output and on stdout.
func (c *chaosRun) say(format string, args ...any) {
	c.t.Helper()
	line := fmt.Sprintf("chaos: [%s] ", c.v.name) + fmt.Sprintf(format, args...)
	c.t.Log(line)
	if !testing.Verbose() {
		fmt.Println(line)
	}
}

func (c *chaosRun) since() string { return time.Since(c.began).Round(100 * time.Millisecond).String() }

const chaosConfig = `# The chaos test's configuration (cmd/switchboard/chaos_integration_test.go).
kafka:
  bootstrap_servers: %[2]s
  group_id: %[1]s.router
  properties:
    session.timeout.ms: "6000"
    heartbeat.interval.ms: "1000"
` + pipelineTopics + `  partitions: 6
  auto_create: true
agents:
  chaos: {topic: %[1]s.agent.chaos.request}
intents:
  chaos:
    agent: chaos
    timeout: %[4]s
    fallback:
      static: {fallback: true}
router:
  delivery: %[3]s
http:
  listen: 127.0.0.1:0
  auth:   # the test talks to Kafka only; serve requires a credential all the same
    api_keys: [{name: chaos, tenant: chaos, key_sha256: 4809b6d2a8ffa977c0703d11e47b57bd57305fea5246d94c642615546724c3e0}]
log:
  level: info
`

func runChaos(t *testing.T, bin, bootstrap string, o chaosOptions, v chaosVariant) {
	c := &chaosRun{t: t, o: o, v: v, bootstrap: bootstrap, began: time.Now(), prefix: "chaos." + randomHex(4)}
	vctx, cancel := context.WithTimeout(context.Background(), o.duration+5*time.Minute)
	defer cancel()

	var broker *localBroker
	if v.brokerRestart {
		var err error
		if broker, err = manageableBroker(vctx, bootstrap); err != nil {
			t.Fatalf("the broker-restart variant cannot run: %v", err)
		}
		// Whatever happens, the broker is left running, as it was found.
		t.Cleanup(func() {
			if err := broker.ensureUp(); err != nil {
				t.Errorf("starting the broker again after the test: %v", err)
			}
		})
	}

	c.dir = t.TempDir()
	if o.logDir != "" {
		c.dir = filepath.Join(o.logDir, v.name+"-"+c.prefix)
		if err := os.MkdirAll(c.dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c.cfgPath = filepath.Join(c.dir, "switchboard.yaml")
	if err := os.WriteFile(c.cfgPath, fmt.Appendf(nil, chaosConfig, c.prefix, bootstrap, o.delivery, chaosTimeout), 0o644); err != nil {
		t.Fatal(err)
	}
	topics := map[string]string{
		"requests": c.prefix + ".intent.request", "results": c.prefix + ".intent.result", "timeouts": c.prefix + ".intent.timeout",
		"dispatches": c.prefix + ".agent.chaos.request", "responses": c.prefix + ".agent.response",
	}
	c.say("delivery=%s intents=%d over %s, kill -9 every %s, broker restart %v, seed %d; topics %s.*, logs in %s",
		o.delivery, o.intents, o.duration, durOrNever(o.killEvery), v.brokerRestart, o.seed, c.prefix, c.dir)

	// Topics first, so that three routers starting at once do not race to
	// create them.
	out, err := exec.CommandContext(vctx, bin, "topics", "create", "--config", c.cfgPath).CombinedOutput()
	if err != nil {
		t.Fatalf("switchboard topics create: %v\n%s", err, out)
	}

	// The processes: three routers and the agent. Every exit path stops them.
	help, _ := exec.CommandContext(vctx, bin, "serve", "--help").CombinedOutput()
	instanceFlag := strings.Contains(string(help), "-instance-id")
	if !instanceFlag {
		c.say("note: this switchboard has no 'serve --instance-id' flag yet: the instance id goes in SWITCHBOARD_INSTANCE_ID only")
	}
	routers := make([]*proc, chaosRouters)
	for i := range routers {
		id := fmt.Sprintf("router-%d", i+1)
		args := []string{"serve", "--config", c.cfgPath}
		if instanceFlag {
			args = append(args, "--instance-id", id)
		}
		routers[i] = &proc{name: id, bin: bin, args: args, env: append(os.Environ(), "SWITCHBOARD_INSTANCE_ID="+id), logPath: filepath.Join(c.dir, id+".log")}
	}
	agent := &proc{
		name: "agent", bin: bin, args: []string{"agent", "--config", c.cfgPath, "--name", "chaos", "--delay", chaosAgentDelay},
		env: os.Environ(), logPath: filepath.Join(c.dir, "agent.log"),
	}
	all := append(append([]*proc(nil), routers...), agent)
	t.Cleanup(func() {
		for _, p := range all {
			p.stop(20 * time.Second)
		}
		if t.Failed() {
			for _, p := range all {
				t.Logf("last lines of %s (%s):\n%s", p.name, p.logPath, p.tail(40))
			}
		}
	})

	// Watch the topics from the start: progress, and when to stop waiting.
	wctx, stopWatching := context.WithCancel(vctx)
	liveReq := watchTopic(wctx, bootstrap, topics["requests"])
	liveRes := watchTopic(wctx, bootstrap, topics["results"])
	watchers := []*liveCounts{liveReq, liveRes}
	defer func() {
		stopWatching()
		for _, w := range watchers {
			<-w.done
		}
	}()

	for _, r := range routers {
		if err := r.start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range routers {
		if err := r.waitLog(vctx, time.Minute, "switchboard serving"); err != nil {
			t.Fatal(err)
		}
	}
	if err := agent.start(); err != nil {
		t.Fatal(err)
	}
	if err := agent.waitLog(vctx, time.Minute, "demo agent running"); err != nil {
		t.Fatal(err)
	}
	for _, r := range routers {
		// Each router in the group: the at_least_once and the exactly_once
		// router say it in their own words.
		if err := r.waitLog(vctx, time.Minute, "partitions taken over", "partitions assigned"); err != nil {
			t.Fatal(err)
		}
	}
	c.say("%d routers and the agent up at %s", len(routers), c.since())

	codec, err := schemas.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	// The delivery timeout is shorter than a Send's context: a publish that
	// fails has been given up by the producer, it will not land later.
	pub, err := client.NewPublisher(kafkaio.Settings{
		Bootstrap: bootstrap, ClientID: "switchboard-chaos-load",
		Properties: map[string]string{"message.timeout.ms": strconv.Itoa(int((chaosSendWithin - 30*time.Second).Milliseconds()))},
	},
		codec, topics["requests"])
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	// Warm-up: intents answered end to end before the load starts.
	warm := make([]chaosIntent, chaosWarmup)
	for i := range warm {
		warm[i] = chaosIntent{id: intents.NewID(), payload: fmt.Sprintf(`{"warmup":%d}`, i), warmup: true}
	}
	var wg sync.WaitGroup
	warmStart := time.Now()
	for i := range warm {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(vctx, time.Minute)
			defer cancel()
			warm[i].acked = pub.Publish(ctx, &schemas.IntentRequest{IntentID: warm[i].id, IntentType: "chaos", Payload: schemas.JSON(warm[i].payload)}) == nil
		}()
	}
	wg.Wait()
	if err := waitUntil(vctx, time.Minute, 100*time.Millisecond, func() bool {
		return liveRes.lacking(idsOf(warm, func(in *chaosIntent) bool { return in.acked })) == 0
	}); err != nil {
		t.Fatalf("the warm-up intents did not all get a result within a minute: the routers or the agent are not working")
	}
	c.say("warm-up: %d intents resolved in %s", chaosWarmup, time.Since(warmStart).Round(time.Millisecond))

	// The load, the kills and the broker restart.
	load := make([]chaosIntent, o.intents)
	for i := range load {
		load[i] = chaosIntent{id: intents.NewID(), payload: fmt.Sprintf(`{"i":%d}`, i)}
		if i%10 == 0 {
			load[i].ignored = true
			load[i].payload = fmt.Sprintf(`{"demo":{"ignore":true},"i":%d}`, i)
		}
	}
	var (
		attempted, acked, failed atomic.Int64
		kills, exits             atomic.Int64
		brokerState              atomic.Value // string
		sendErrMu                sync.Mutex
		sendErrs                 = map[string]int{}
	)
	brokerState.Store("up")
	rng := rand.New(rand.NewPCG(o.seed, o.seed^0x5eed))

	loadDone := make(chan struct{})
	chaosCtx, stopChaos := context.WithCancel(vctx)
	chaosDone := make(chan struct{})
	var (
		chaosErr   error
		killLog    []string
		exitReport []string
	)
	go func() { // owns the routers until chaosDone
		defer close(chaosDone)
		loadDone := loadDone
		var killC <-chan time.Time
		if o.killEvery > 0 {
			kt := time.NewTicker(o.killEvery)
			defer kt.Stop()
			killC = kt.C
		}
		supervise := time.NewTicker(500 * time.Millisecond)
		defer supervise.Stop()
		for {
			select {
			case <-chaosCtx.Done():
				return
			case <-loadDone:
				killC, loadDone = nil, nil
			case <-killC:
				select {
				case <-loadDone: // the load ended as the ticker fired: no kill after it
					killC, loadDone = nil, nil
					continue
				default:
				}
				r := routers[rng.IntN(len(routers))]
				pid := 0
				if r.cmd != nil {
					pid = r.cmd.Process.Pid
				}
				if err := r.kill9(); err != nil {
					chaosErr = err
					return
				}
				kills.Add(1)
				killLog = append(killLog, fmt.Sprintf("%s %s(pid %d)", c.since(), r.name, pid))
				c.say("kill -9 %s (pid %d) at %s; starting it again", r.name, pid, c.since())
				if err := r.start(); err != nil {
					chaosErr = err
					return
				}
			case <-supervise.C:
				for _, r := range routers {
					if r.exitedOnItsOwn() {
						exits.Add(1)
						last := strings.TrimSpace(r.current())
						if i := strings.LastIndexByte(last, '\n'); i >= 0 {
							last = last[i+1:]
						}
						exitReport = append(exitReport, fmt.Sprintf("%s at %s (%v): %s", r.name, c.since(), r.exitErr, clip(last, 300)))
						c.say("%s exited by itself (%v) at %s; starting it again. Its last line: %s", r.name, r.exitErr, c.since(), clip(last, 300))
						if err := r.start(); err != nil {
							chaosErr = err
							return
						}
					}
				}
			}
		}
	}()

	var outages []window
	var brokerErr error
	brokerDone := make(chan struct{})
	brokerRestarts := 0
	go func() {
		defer close(brokerDone)
		if broker == nil {
			return
		}
		select {
		case <-time.After(o.duration / 2): // the workload's schedule
		case <-vctx.Done():
			return
		}
		c.say("broker: kafka.sh down, then up, at %s", c.since())
		brokerState.Store("restarting")
		w, err := broker.restart(vctx, o.downFor)
		brokerState.Store("up")
		if err != nil {
			brokerErr = err
			return
		}
		brokerRestarts++
		outages = append(outages, window{w.from, w.to + chaosRecovery.Milliseconds()})
		c.say("broker: down from t=%s for %s (kafka.sh down+up); outage window for the verdict ends %s later",
			time.UnixMilli(w.from).Sub(c.began).Round(100*time.Millisecond), time.Duration(w.to-w.from)*time.Millisecond, chaosRecovery)
	}()
	// On every way out, the goroutines that report stop before the test ends.
	defer func() {
		stopChaos()
		<-chaosDone
		cancel()
		<-brokerDone
	}()

	progress := func(phase string) {
		c.say("%s t=%s sent=%d/%d acked=%d failed=%d results=%d kills=%d router_exits=%d broker=%s",
			phase, c.since(), attempted.Load(), o.intents, acked.Load(), failed.Load(), liveRes.total(), kills.Load(), exits.Load(), brokerState.Load())
	}
	var sends sync.WaitGroup
	send := func(in *chaosIntent) {
		defer sends.Done()
		ctx, cancel := context.WithTimeout(vctx, chaosSendWithin)
		defer cancel()
		err := pub.Publish(ctx, &schemas.IntentRequest{IntentID: in.id, IntentType: "chaos", Payload: schemas.JSON(in.payload)})
		if err != nil {
			failed.Add(1)
			sendErrMu.Lock()
			sendErrs[err.Error()]++
			sendErrMu.Unlock()
			return
		}
		in.acked = true
		acked.Add(1)
	}
	loadStart := time.Now()
	c.say("load: %d intents at %.0f/s for %s", o.intents, float64(o.intents)/o.duration.Seconds(), o.duration)
	pace := time.NewTicker(10 * time.Millisecond)
	report := time.NewTicker(10 * time.Second)
	for next := 0; next < len(load); {
		select {
		case <-vctx.Done():
			t.Fatalf("the run outlasted its deadline during the load")
		case <-report.C:
			progress("load")
		case <-pace.C:
			due := min(len(load), int(float64(len(load))*float64(time.Since(loadStart))/float64(o.duration)))
			for ; next < due; next++ {
				attempted.Add(1)
				sends.Add(1)
				go send(&load[next])
			}
		}
	}
	pace.Stop()
	close(loadDone)
	c.say("load: all %d intents handed to the producer at %s; waiting for acknowledgements", o.intents, c.since())
	sends.Wait()
	<-brokerDone
	if brokerErr != nil {
		stopChaos()
		<-chaosDone
		t.Fatalf("restarting the broker: %v", brokerErr)
	}
	progress("load done:")
	report.Reset(10 * time.Second)

	// Wait for every intent that entered Kafka to have a result.
	entered := func(yield func(string) bool) {
		for i := range load {
			if (load[i].acked || liveReq.has(load[i].id)) && !yield(load[i].id) {
				return
			}
		}
	}
	drainStart := time.Now()
	drained := waitUntil(vctx, chaosDrainWithin, 250*time.Millisecond, func() bool {
		select {
		case <-report.C:
			progress("drain")
		default:
		}
		return liveRes.lacking(entered) == 0
	}) == nil
	report.Stop()
	c.say("drain: %s after the load, %d intents still without a result (waited %s)", map[bool]string{true: "done", false: "gave up"}[drained],
		liveRes.lacking(entered), time.Since(drainStart).Round(100*time.Millisecond))

	// Stop the chaos, then every process, so that nothing writes while the
	// topics are read.
	stopChaos()
	<-chaosDone
	if chaosErr != nil {
		t.Errorf("chaos: %v", chaosErr)
	}
	var stuck []string
	var stopWG sync.WaitGroup
	var stuckMu sync.Mutex
	for _, p := range all {
		stopWG.Add(1)
		go func() {
			defer stopWG.Done()
			if !p.stop(30 * time.Second) {
				stuckMu.Lock()
				stuck = append(stuck, p.name)
				stuckMu.Unlock()
			}
		}()
	}
	stopWG.Wait()
	if len(stuck) > 0 {
		sort.Strings(stuck)
		for _, p := range all {
			if slices.Contains(stuck, p.name) {
				t.Logf("goroutines of %s when it did not stop (SIGQUIT):\n%s", p.name, p.stacks())
			}
		}
		t.Errorf("%v did not stop within 30s of SIGTERM (goroutine dumps above)", stuck)
	}
	stopWatching()

	// The verdict, from the topics read to their end.
	rd, err := c.readAll(vctx, topics)
	if err != nil {
		t.Fatal(err)
	}
	sent := append(append([]chaosIntent(nil), warm...), load...)
	verdict := judge(sent, rd.obs, "chaos", outages)
	c.report(&verdict, rd, kills.Load(), exits.Load(), brokerRestarts, killLog, exitReport, sendErrs, all)
	if missed := c.liveMissed(rd, liveRes); missed > 0 {
		t.Errorf("the live reader of the results topic (kafkaio.Read from the end, as the API's results reader and client.Await use it) never saw %d results that are on the topic", missed)
	}
	if !drained {
		t.Errorf("not every intent had a result %s after the load", chaosDrainWithin)
	}
	if n := verdict.failuresUnder(o.delivery); n > 0 {
		t.Errorf("%d intents broke the promise of %s (see the examples above)", n, promiseOf(o.delivery))
	}
	if !verdict.pairedLateOK() {
		t.Errorf("the routers resolved %d intents by their deadline although the agent had answered them at least %dms before it (%d answered in time): more than %.0f%% (see the paired_late examples above)",
			verdict.PairedLate, agentLateMs, verdict.Answered+verdict.PairedLate, pairedLateMost*100)
	}
}

// chaosRead is what the topics held at the end of a run.
type chaosRead struct {
	obs       chaosObserved
	byReason  map[string]int   // timeout events by reason/fallback
	byOutcome map[string]int   // result records by outcome
	resultAt  map[string]int32 // intent id -> the partition of its first result
	// Records per 5 s since the run began, by topic role: what stalled when.
	timeline map[string][]int
}

const chaosBucket = 5 * time.Second

// readAll reads the run's topics to their end.
func (c *chaosRun) readAll(ctx context.Context, topics map[string]string) (*chaosRead, error) {
	rd := &chaosRead{
		obs: chaosObserved{
			requests: map[string]int{}, results: map[string][]*schemas.IntentResult{}, timeouts: map[string][]*schemas.IntentTimeout{},
			answeredAt: map[string]int64{},
		},
		byReason: map[string]int{}, byOutcome: map[string]int{}, resultAt: map[string]int32{}, timeline: map[string][]int{},
	}
	codec, err := schemas.NewCodec()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	start := time.Now()
	count := func(role string, m *kafka.Message) {
		b := int(m.Timestamp.Sub(c.began) / chaosBucket)
		if b < 0 {
			b = 0
		}
		tl := rd.timeline[role]
		for len(tl) <= b {
			tl = append(tl, 0)
		}
		tl[b]++
		rd.timeline[role] = tl
	}
	read := func(role string, fn func(*kafka.Message)) error {
		return readToEnd(ctx, c.bootstrap, topics[role], func(m *kafka.Message) {
			count(role, m)
			fn(m)
		})
	}
	if err := read("requests", func(m *kafka.Message) { rd.obs.requests[string(m.Key)]++ }); err != nil {
		return nil, err
	}
	if err := read("results", func(m *kafka.Message) {
		var r schemas.IntentResult
		if codec.Decode(m.Value, &r) != nil {
			rd.obs.undecodable++
			return
		}
		if len(rd.obs.results[r.IntentID]) == 0 {
			rd.resultAt[r.IntentID] = m.TopicPartition.Partition
		}
		rd.obs.results[r.IntentID] = append(rd.obs.results[r.IntentID], &r)
		rd.byOutcome[string(r.Outcome)]++
	}); err != nil {
		return nil, err
	}
	if err := read("timeouts", func(m *kafka.Message) {
		var to schemas.IntentTimeout
		if codec.Decode(m.Value, &to) != nil {
			rd.obs.undecodable++
			return
		}
		rd.obs.timeouts[to.IntentID] = append(rd.obs.timeouts[to.IntentID], &to)
		rd.byReason[string(to.Reason)+"/"+string(to.Fallback)]++
	}); err != nil {
		return nil, err
	}
	if err := read("dispatches", func(*kafka.Message) {}); err != nil {
		return nil, err
	}
	if err := read("responses", func(m *kafka.Message) {
		at, id := m.Timestamp.UnixMilli(), string(m.Key)
		if first, ok := rd.obs.answeredAt[id]; !ok || at < first {
			rd.obs.answeredAt[id] = at
		}
	}); err != nil {
		return nil, err
	}
	c.say("read the topics to their end (read_committed) in %s", time.Since(start).Round(time.Millisecond))
	return rd, nil
}

// liveMissed reports the results the live reader never saw, by partition.
func (c *chaosRun) liveMissed(rd *chaosRead, live *liveCounts) int {
	byPartition := map[int32]int{}
	n := 0
	for id := range rd.obs.results {
		if !live.has(id) {
			byPartition[rd.resultAt[id]]++
			n++
		}
	}
	if n > 0 {
		c.say("finding: the live reader of the results topic missed %d results that the final read found; by partition: %v", n, byPartition)
	}
	return n
}

func (c *chaosRun) report(v *chaosVerdict, rd *chaosRead, kills, exits int64, brokerRestarts int,
	killLog, exitReport []string, sendErrs map[string]int, procs []*proc,
) {
	c.say("kills: %d %v", kills, killLog)
	for _, e := range exitReport {
		c.say("router exit: %s", e)
	}
	for e, n := range sendErrs {
		c.say("publish error (%d×): %s", n, e)
	}
	c.say("results by outcome (all records, warm-up included): %v; timeout events by reason/fallback: %v", rd.byOutcome, rd.byReason)
	for _, role := range []string{"requests", "dispatches", "responses", "results", "timeouts"} {
		c.say("records per %s since the start, %-10s %v", chaosBucket, role+":", rd.timeline[role])
	}
	c.say("fallbacks the agent would have answered: expired_unowned=%d (%d never dispatched, %d answered in time but resolved >%dms after the deadline by a new owner), agent_late=%d (answered <%dms before the deadline, or after), expired_outage=%d, paired_late=%d (answered in time, resolved at the deadline by its owner)",
		v.ExpiredUnowned, v.NeverDispatched, v.ResolvedLate, resolvedLateMs, v.AgentLate, agentLateMs, v.ExpiredOutage, v.PairedLate)
	for _, p := range procs {
		lines := logSummary(p.log())
		if len(lines) > 8 {
			lines = append(lines[:8], fmt.Sprintf("… %d more kinds", len(lines)-8))
		}
		for _, l := range lines {
			c.say("log %s: %s", p.name, l)
		}
	}
	for _, e := range v.exampleLines() {
		c.say("example %s", e)
	}
	line := fmt.Sprintf("chaos: run=%s delivery=%s intents=%d results=%d missing=%d duplicate=%d timeouts=%d timeout_dups=%d answered=%d fallback=%d expired_unowned=%d shed=%d kills=%d broker_restarts=%d"+
		" agent_late=%d expired_outage=%d paired_late=%d entered=%d unpublished=%d send_errors=%d timeout_missing=%d timeout_orphans=%d wrong_outcome=%d lost_acked=%d strays=%d router_exits=%d took=%s",
		c.v.name, c.o.delivery, v.Intents, v.Results, v.Missing, v.Duplicate, v.Timeouts, v.TimeoutDups, v.Answered, v.Fallback, v.ExpiredUnowned, v.Shed, kills, brokerRestarts,
		v.AgentLate, v.ExpiredOutage, v.PairedLate, v.Entered, v.Unpublished, v.SendErrors, v.TimeoutMissing, v.TimeoutOrphans, v.WrongOutcome, v.LostAcked, v.Strays, exits, time.Since(c.began).Round(time.Second))
	c.t.Log(line)
	fmt.Println(line)
}

// waitUntil polls cond every `every` until it holds, within a deadline.
func waitUntil(ctx context.Context, within, every time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return errors.New("condition not met in time")
		case <-tick.C:
		}
	}
	return nil
}

func idsOf(ins []chaosIntent, keep func(*chaosIntent) bool) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for i := range ins {
			if keep(&ins[i]) && !yield(ins[i].id) {
				return
			}
		}
	}
}

func durOrNever(d time.Duration) string {
	if d <= 0 {
		return "never"
	}
	return d.String()
}

// promiseOf says what the chaos test holds a delivery guarantee to.
func promiseOf(delivery string) string {
	if delivery == config.AtLeastOnce {
		return "at least one result and timeout event, and nothing else wrong (at_least_once may write a second after a crash)"
	}
	return "exactly one result and at most one timeout event"
}
