package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"time"

	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/embedded"
)

// benchOptions are the bench's flags, checked.
type benchOptions struct {
	rate         float64
	duration     time.Duration
	stepUp       bool
	startRate    float64
	step         float64
	stepDuration time.Duration
	maxP99       time.Duration
	maxLag       int64 // 0: one second of the step's rate
	stepRepeat   bool
	maxRate      float64
	serviceTime  time.Duration
	ignoreRate   float64
	errorRate    float64
	timeout      time.Duration
	baseline     bool
	json         bool
	partitions   int
	delivery     string
	embedded     bool
	payloadBytes int
	keepTopics   bool
	cpuProfile   string
	trace        string
}

// benchLimit bounds a phase's load: every time the bench keeps is in int32
// microseconds since the phase began (35 minutes, of which warm-up and drain
// may take 7), and a benchmark should not hold a shared machine longer.
const benchLimit = 25 * time.Minute

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", "[--config FILE | --brokers B | --embedded] [flags]", `
Measure Switchboard: start a router in this process (as 'serve' does, with
topics and consumer groups of its own, named bench.<id>.*, deleted
afterwards), demo agents with the given service time and error and ignore
mix, and offer intents at a fixed rate, open loop: intents are published on
schedule whether or not results come back, so a slow system shows as
latency, not as a lower offered rate.

It reports offered and achieved throughput; end-to-end latency (request
record timestamp to result record timestamp) and, as a caller sees it, to
when the result was read; the router's added latency (dispatch record minus
request record; result record minus response record); outcomes; the
router's peak pending intents; and the process's CPU and RSS. Record
timestamps are whole milliseconds. A progress line goes to stderr every
second; the report to stdout, as a table or with --json as JSON.

--step-up raises the rate by --step every --step-duration, from
--start-rate, until a step's p99 (of the results read during it, as a
caller observes them: from the send to when a read_committed reader had
the result) exceeds --max-p99 or the intents without a result exceed
--max-lag, and reports the knee: the last rate that held. A step that did
not hold is run once more at the same rate (--step-repeat) once its
backlog has drained, so that one stall does not decide the knee.

--baseline then runs the same load over the same four Kafka hops (request,
dispatch, response, result) carried by plain consume-produce loops with the
router's own consumer and producer settings and no routing logic, and
reports the router's throughput as a fraction of the baseline's.

It runs against the cluster of --brokers or --config (kafka.properties such
as linger.ms apply to every client), or with --embedded on an in-process
broker (no Kafka needed; its CPU then counts as the process's).`, `  switchboard bench --embedded --rate 500 --duration 5s
  switchboard bench --brokers 127.0.0.1:9092 --delivery at_least_once --rate 1000 --duration 10s --baseline
  switchboard bench --config bench.yaml --step-up --start-rate 1000 --step 1000 --step-duration 3s --max-p99 50ms
  switchboard bench --embedded --rate 200 --service-time 20ms --ignore-rate 0.05 --error-rate 0.01 --timeout 500ms --json`, stderr)
	configPath := fs.String("config", "", "read brokers, Kafka properties, registry and router settings from this YAML `file` (its topics, agents and intents are not used)")
	brokers := fs.String("brokers", "", "Kafka bootstrap `servers` (default: the config's, else $SWITCHBOARD_KAFKA_BOOTSTRAP_SERVERS, else localhost:9092)")
	o := &benchOptions{}
	fs.BoolVar(&o.embedded, "embedded", false, "run on an in-process broker instead of a cluster")
	fs.Float64Var(&o.rate, "rate", 1000, "the `rate` to offer, in intents per second")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "how long to offer them")
	fs.BoolVar(&o.stepUp, "step-up", false, "raise the rate step by step until it no longer holds, and report the knee")
	fs.Float64Var(&o.startRate, "start-rate", 1000, "--step-up: the first step's `rate` (intents/s)")
	fs.Float64Var(&o.step, "step", 1000, "--step-up: what each step adds to the `rate` (intents/s)")
	fs.DurationVar(&o.stepDuration, "step-duration", 5*time.Second, "--step-up: how long each step lasts")
	fs.DurationVar(&o.maxP99, "max-p99", 500*time.Millisecond, "--step-up: a step holds while the p99 of its end-to-end latency is at most this `duration`")
	fs.BoolVar(&o.stepRepeat, "step-repeat", true, "--step-up: run a step that did not hold once more at the same rate before calling the knee (one stall does not decide it)")
	fs.Int64Var(&o.maxLag, "max-lag", 0, "--step-up: … and at most this many `intents` have no result at its end (0: one second of the step's rate)")
	fs.Float64Var(&o.maxRate, "max-rate", 50000, "--step-up: stop after the step at this `rate` (intents/s)")
	fs.DurationVar(&o.serviceTime, "service-time", 0, "how long the demo agent takes per intent")
	fs.Float64Var(&o.ignoreRate, "ignore-rate", 0, "the `fraction` of intents the agent never answers (they time out and get the static fallback)")
	fs.Float64Var(&o.errorRate, "error-rate", 0, "the `fraction` of answered intents the agent fails (outcome agent_error)")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Second, "the bench intent type's timeout")
	fs.BoolVar(&o.baseline, "baseline", false, "also run the raw Kafka baseline, after the router, and compare")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.IntVar(&o.partitions, "partitions", 0, "`partitions` of the bench's topics (default: the config's topics.partitions, 6)")
	fs.StringVar(&o.delivery, "delivery", "", "the router's delivery `guarantee`: exactly_once or at_least_once (default: the config's router.delivery, exactly_once)")
	fs.IntVar(&o.payloadBytes, "payload-bytes", 100, "approximate size of each intent's payload, in `bytes`")
	fs.BoolVar(&o.keepTopics, "keep-topics", false, "leave the bench's topics and consumer groups on the cluster")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of this process during the router's load to this `file` (go tool pprof)")
	fs.StringVar(&o.trace, "trace", "", "write an execution trace of this process during the router's load to this `file` (go tool trace: scheduling latency, GC pauses, blocking)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := o.check(*brokers); err != nil {
		return err
	}
	base, err := (&conn{config: configPath, brokers: brokers, registry: new(string)}).load()
	if err != nil {
		return err
	}
	if o.embedded {
		cluster, err := embedded.Start(embedded.Options{})
		if err != nil {
			return err
		}
		defer cluster.Close()
		base.Kafka.BootstrapServers = cluster.Bootstrap()
		base.SchemaRegistry.URL = ""
	}
	if o.partitions == 0 {
		o.partitions = base.Topics.Partitions
	}
	if o.delivery == "" {
		o.delivery = base.Router.Delivery
	}

	rep := newBenchReport(o, base)
	kinds := []string{phaseRouter}
	if o.baseline {
		kinds = append(kinds, phaseBaseline)
	}
	log := newLogger(stderr, "warn", base.Log.Format)
	for _, kind := range kinds {
		id := newRunID()
		cfg, err := benchConfig(base, id, o)
		if err != nil {
			return err
		}
		codec, err := codecFor(cfg)
		if err != nil {
			return err
		}
		rep.Encoding = codec.Encoding().String()
		runtime.GC()
		debug.FreeOSMemory() // what an earlier phase left is not this one's
		ph := newPhase(kind, id, o, cfg, codec, stderr, log.With("bench", kind))
		ph.rssStart = rssBytes()
		fmt.Fprintf(stderr, "bench %s: topics bench.%s.*, %s, %d partitions, on %s; warming up\n", kind, id, o.delivery, o.partitions, cfg.Kafka.BootstrapServers)
		if err := ph.run(ctx, ph.load); err != nil {
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return errors.New("interrupted")
			}
			return fmt.Errorf("%s: %w", kind, err)
		}
		pr := ph.report()
		if kind == phaseRouter {
			rep.Router = pr
		} else {
			rep.Baseline = pr
		}
	}
	rep.compare()
	if o.json {
		return rep.writeJSON(stdout)
	}
	rep.writeTable(stdout)
	return nil
}

// check validates the flags; its errors name the flag.
func (o *benchOptions) check(brokers string) error {
	frac := func(name string, v float64) error {
		if v < 0 || v > 1 || math.IsNaN(v) {
			return fmt.Errorf("--%s %v is not between 0 and 1", name, v)
		}
		return nil
	}
	pos := func(name string, v float64) error {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("--%s %v must be more than 0", name, v)
		}
		return nil
	}
	for _, err := range []error{
		frac("ignore-rate", o.ignoreRate), frac("error-rate", o.errorRate),
		pos("rate", o.rate), pos("start-rate", o.startRate), pos("step", o.step), pos("max-rate", o.maxRate),
	} {
		if err != nil {
			return err
		}
	}
	switch {
	case o.embedded && brokers != "":
		return errors.New("--embedded and --brokers do not go together: --embedded runs its own broker")
	case o.delivery != "" && o.delivery != config.ExactlyOnce && o.delivery != config.AtLeastOnce:
		return fmt.Errorf("--delivery %q is not exactly_once or at_least_once", o.delivery)
	case o.partitions < 0:
		return fmt.Errorf("--partitions %d is negative", o.partitions)
	case o.timeout <= 0 || o.timeout > 5*time.Minute:
		return fmt.Errorf("--timeout %s must be more than 0 and at most 5m", o.timeout)
	case o.serviceTime < 0:
		return fmt.Errorf("--service-time %s is negative", o.serviceTime)
	case o.maxLag < 0:
		return fmt.Errorf("--max-lag %d is negative", o.maxLag)
	case o.payloadBytes < 0 || o.payloadBytes > 512<<10:
		return fmt.Errorf("--payload-bytes %d must be between 0 and 524288", o.payloadBytes)
	}
	if !o.stepUp {
		if o.duration <= 0 || o.duration > benchLimit {
			return fmt.Errorf("--duration %s must be more than 0 and at most %s", o.duration, benchLimit)
		}
		return nil
	}
	if o.stepDuration < time.Second {
		return fmt.Errorf("--step-duration %s must be at least 1s", o.stepDuration)
	}
	if o.maxRate < o.startRate {
		return fmt.Errorf("--max-rate %v is below --start-rate %v", o.maxRate, o.startRate)
	}
	steps := math.Floor((o.maxRate-o.startRate)/o.step) + 1
	if longest := time.Duration(steps * float64(o.stepDuration)); longest > benchLimit {
		return fmt.Errorf("the step-up could take %s (%v steps of %s), more than %s: raise --step or lower --max-rate or --step-duration",
			longest.Round(time.Second), steps, o.stepDuration, benchLimit)
	}
	return nil
}

func newRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// benchConfig is base's connection and router settings with the bench's own
// topics (bench.<id>.*, retained for an hour), consumer group, one agent and
// one intent type (its timeout --timeout, its fallback a static answer).
func benchConfig(base *config.Config, id string, o *benchOptions) (*config.Config, error) {
	y := fmt.Sprintf(`
topics:
  requests: bench.%[1]s.intent.request
  responses: bench.%[1]s.agent.response
  results: bench.%[1]s.intent.result
  timeouts: bench.%[1]s.intent.timeout
  progress: bench.%[1]s.intent.progress
  dead_letter: bench.%[1]s.intent.dlq
  pending: bench.%[1]s.router.pending
  fallback_cache: bench.%[1]s.fallback.cache
  context_snapshots: bench.%[1]s.context.snapshot
  partitions: %[2]d
  replication_factor: %[3]d
  retention: 1h
  max_message_bytes: %[4]d
agents:
  %[5]s: {topic: bench.%[1]s.agent.%[5]s.request}
intents:
  %[5]s:
    agent: %[5]s
    timeout: %[6]s
    fallback: {static: {fallback: true}}
`, id, o.partitions, base.Topics.ReplicationFactor, base.Topics.MaxMessageBytes, benchIntentType, o.timeout)
	cfg, err := config.Parse("the bench's configuration", []byte(y), nil)
	if err != nil {
		return nil, err
	}
	cfg.Kafka = base.Kafka
	cfg.Kafka.Properties = maps.Clone(base.Kafka.Properties)
	cfg.Kafka.GroupID = "switchboard-bench-" + id
	cfg.SchemaRegistry = base.SchemaRegistry
	cfg.Router = base.Router
	cfg.Router.InstanceID = "" // a random one: no static membership, a transactional.id of its own
	cfg.Router.Delivery = o.delivery
	cfg.Log = base.Log
	return cfg, nil
}

// load offers the phase's load: a fixed rate for the duration, or the
// step-up. It returns once it released its last intent.
func (ph *phase) load(ctx context.Context, release func(int64, time.Time)) error {
	o := ph.o
	start := ph.clock.Now()
	ph.markStart(start)
	rate := o.rate
	if o.stepUp {
		rate = o.startRate
	}
	p := newPacer(start, rate)
	s := &schedule{clock: ph.clock, tick: time.Millisecond, release: release}
	nextProgress := start.Add(time.Second)
	progress := func(now time.Time) {
		if now.Before(nextProgress) {
			return
		}
		nextProgress = nextProgress.Add(time.Second)
		ph.progress(now.Sub(start), rate)
	}
	if !o.stepUp {
		s.limit = p.due(start.Add(o.duration))
		s.run(ctx, p, func(now time.Time, released int64) bool {
			progress(now)
			return released >= s.limit
		})
		ph.markEnd(ph.clock.Now())
		return ctx.Err()
	}

	stepStart, stepEnd := start, start.Add(o.stepDuration)
	var resultsBefore, releasedBefore int64
	repeated := false // the current rate is a repeat of a step that did not hold
	ph.takeStep()
	s.run(ctx, p, func(now time.Time, released int64) bool {
		progress(now)
		if now.Before(stepEnd) {
			return false
		}
		p99, n := ph.takeStep()
		results := ph.results.Load()
		st := stepReport{
			Rate: rate, Released: released - releasedBefore, Results: results - resultsBefore,
			Achieved:  float64(results-resultsBefore) / now.Sub(stepStart).Seconds(),
			LiveP99Ms: float64(p99), Lag: ph.inFlight(),
			startUs: ph.us(stepStart), endUs: ph.us(now),
		}
		maxLag := o.maxLag
		if maxLag == 0 {
			maxLag = int64(math.Ceil(rate))
		}
		st.Held = n > 0 && time.Duration(p99)*time.Millisecond <= o.maxP99 && st.Lag <= maxLag
		st.Repeat = repeated
		ph.steps = append(ph.steps, st)
		switch {
		case !st.Held && !repeated && o.stepRepeat:
			// One stall (a log roll, a GC, a neighbour's burst) should not
			// decide the knee: a step that did not hold runs once more at
			// the same rate, after the backlog it left has drained.
			repeated = true
			ph.settleBacklog(ctx, maxLag)
			now = ph.clock.Now()
			p.resume(now, released)
			stepStart, stepEnd = now, now.Add(o.stepDuration)
			resultsBefore, releasedBefore = ph.results.Load(), released
			ph.takeStep()
			fmt.Fprintf(ph.stderr, "bench %s: step %d did not hold; repeating %v intents/s once\n", ph.kind, len(ph.steps), rate)
			return false
		case !st.Held:
			ph.stopReason = fmt.Sprintf("the step at %v/s did not hold: p99 %s (limit %s), %d intents without a result (limit %d)",
				rate, time.Duration(p99)*time.Millisecond, o.maxP99, st.Lag, maxLag)
			return true
		case rate+o.step > o.maxRate:
			ph.knee = rate
			ph.stopReason = fmt.Sprintf("reached --max-rate %v/s: the knee is higher", o.maxRate)
			return true
		}
		ph.knee = rate
		repeated = false
		rate += o.step
		p.setRate(now, rate)
		stepStart, stepEnd = now, now.Add(o.stepDuration)
		resultsBefore, releasedBefore = results, released
		fmt.Fprintf(ph.stderr, "bench %s: step %d held; now %v intents/s\n", ph.kind, len(ph.steps), rate)
		return false
	})
	ph.markEnd(ph.clock.Now())
	return ctx.Err()
}

// settleBacklog pauses the load until at most a tenth of maxLag intents
// are without a result, or for the intent timeout plus a second (by then
// every intent sent has its result or never will).
func (ph *phase) settleBacklog(ctx context.Context, maxLag int64) {
	limit := ph.clock.Now().Add(ph.o.timeout + time.Second)
	t := ph.clock.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for ph.inFlight() > maxLag/10 {
		select {
		case <-ctx.Done():
			return
		case now := <-t.Chan():
			if now.After(limit) {
				return
			}
		}
	}
}

// takeStep returns the p99 (ms) and count of the step's results and starts
// a new step.
func (ph *phase) takeStep() (p99 int64, n uint64) {
	ph.mu.Lock()
	defer ph.mu.Unlock()
	p99, n = ph.step.quantile(0.99), ph.step.count()
	ph.step = histogram{}
	return p99, n
}

func (ph *phase) markStart(now time.Time) {
	ph.loadStart, ph.cpuStart, ph.hostStart = now, cpuTime(), readHostCPU()
	ph.statsStart = ph.stats.total()
	ph.profile = ph.startRecording(ph.o.cpuProfile, "CPU profile", pprof.StartCPUProfile)
	ph.traceFile = ph.startRecording(ph.o.trace, "execution trace", trace.Start)
}

func (ph *phase) markEnd(now time.Time) {
	ph.loadEnd, ph.cpuEnd, ph.hostEnd = now, cpuTime(), readHostCPU()
	ph.stopRecording(&ph.profile, "CPU profile", pprof.StopCPUProfile)
	ph.stopRecording(&ph.traceFile, "execution trace", trace.Stop)
}

// startRecording starts a recording of the router phase's load (--cpuprofile,
// --trace) into path; nil when there is no path, in the baseline phase, or
// when it cannot start (said on stderr).
func (ph *phase) startRecording(path, what string, start func(io.Writer) error) *os.File {
	if path == "" || ph.kind != phaseRouter {
		return nil
	}
	f, err := os.Create(path)
	if err == nil {
		if err = start(f); err != nil {
			_ = f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(ph.stderr, "bench: no %s: %v\n", what, err)
		return nil
	}
	return f
}

// stopRecording stops what startRecording started into *f.
func (ph *phase) stopRecording(f **os.File, what string, stop func()) {
	if *f == nil {
		return
	}
	stop()
	if err := (*f).Close(); err != nil {
		fmt.Fprintf(ph.stderr, "bench: writing the %s: %v\n", what, err)
	}
	*f = nil
}

// progress prints one line: elapsed, rate, sent, results, in flight, p99
// of the results so far.
func (ph *phase) progress(elapsed time.Duration, rate float64) {
	ph.mu.Lock()
	p99 := ph.live.quantile(0.99)
	ph.mu.Unlock()
	fmt.Fprintf(ph.stderr, "bench %s: %3.0fs  %v/s  sent %d  results %d  in flight %d  p99 %dms\n",
		ph.kind, elapsed.Seconds(), rate, ph.released.Load(), ph.results.Load(), ph.inFlight(), p99)
}
