package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// Options are what one bench measures: switchboard bench's flags, checked
// by Check.
type Options struct {
	Rate         float64
	Duration     time.Duration
	StepUp       bool
	StartRate    float64
	Step         float64
	StepDuration time.Duration
	MaxP99       time.Duration
	MaxLag       int64 // 0: one second of the step's rate
	StepRepeat   bool
	MaxRate      float64
	ServiceTime  time.Duration
	IgnoreRate   float64
	ErrorRate    float64
	Timeout      time.Duration
	Baseline     bool
	JSON         bool
	Partitions   int
	Delivery     string
	Embedded     bool
	PayloadBytes int
	KeepTopics   bool
	CPUProfile   string
	Trace        string
}

// Wiring is what the command hands the bench: the configuration it loaded
// (its connection, schema registry, router and telemetry settings; its
// topics, agents and intents are not used), how it builds a Kafka client's
// settings and a codec from a configuration, and where the bench logs.
type Wiring struct {
	Base     *config.Config
	Settings func(cfg *config.Config, clientID string) kafkaio.Settings
	Codec    func(cfg *config.Config) (*schemas.Codec, error)
	Log      *slog.Logger
}

// limit bounds a phase's load: every time the bench keeps is in int32
// microseconds since the phase began (35 minutes, of which warm-up and drain
// may take 7), and a benchmark should not hold a shared machine longer.
const limit = 25 * time.Minute

// Run measures: the router phase, then with o.Baseline the raw Kafka
// baseline, and writes the report to stdout (progress to stderr). o must
// have passed Check. The base configuration is changed: with o.Embedded it
// points at the in-process broker Run starts.
func Run(ctx context.Context, o *Options, w Wiring, stdout, stderr io.Writer) error {
	base := w.Base
	if o.Embedded {
		cluster, err := embedded.Start(embedded.Options{})
		if err != nil {
			return err
		}
		defer cluster.Close()
		base.Kafka.BootstrapServers = cluster.Bootstrap()
		base.SchemaRegistry.URL = ""
	}
	if o.Partitions == 0 {
		o.Partitions = base.Topics.Partitions
	}
	if o.Delivery == "" {
		o.Delivery = base.Router.Delivery
	}

	rep := newBenchReport(o, base)
	kinds := []string{phaseRouter}
	if o.Baseline {
		kinds = append(kinds, phaseBaseline)
	}
	for _, kind := range kinds {
		id := newRunID()
		cfg, err := benchConfig(base, id, o)
		if err != nil {
			return err
		}
		codec, err := w.Codec(cfg)
		if err != nil {
			return err
		}
		rep.Encoding = codec.Encoding().String()
		runtime.GC()
		debug.FreeOSMemory() // what an earlier phase left is not this one's
		ph := newPhase(kind, id, o, cfg, codec, w.Settings, stderr, w.Log.With("bench", kind))
		ph.rssStart = rssBytes()
		fmt.Fprintf(stderr, "bench %s: topics bench.%s.*, %s, %d partitions, on %s; warming up\n", kind, id, o.Delivery, o.Partitions, cfg.Kafka.BootstrapServers)
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
	if o.JSON {
		return rep.writeJSON(stdout)
	}
	rep.writeTable(stdout)
	return nil
}

// Check validates the options; its errors name the flag. brokers is the
// --brokers flag's value, which --embedded excludes.
func (o *Options) Check(brokers string) error {
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
		frac("ignore-rate", o.IgnoreRate), frac("error-rate", o.ErrorRate),
		pos("rate", o.Rate), pos("start-rate", o.StartRate), pos("step", o.Step), pos("max-rate", o.MaxRate),
	} {
		if err != nil {
			return err
		}
	}
	switch {
	case o.Embedded && brokers != "":
		return errors.New("--embedded and --brokers do not go together: --embedded runs its own broker")
	case o.Delivery != "" && o.Delivery != config.ExactlyOnce && o.Delivery != config.AtLeastOnce:
		return fmt.Errorf("--delivery %q is not exactly_once or at_least_once", o.Delivery)
	case o.Partitions < 0:
		return fmt.Errorf("--partitions %d is negative", o.Partitions)
	case o.Timeout <= 0 || o.Timeout > 5*time.Minute:
		return fmt.Errorf("--timeout %s must be more than 0 and at most 5m", o.Timeout)
	case o.ServiceTime < 0:
		return fmt.Errorf("--service-time %s is negative", o.ServiceTime)
	case o.MaxLag < 0:
		return fmt.Errorf("--max-lag %d is negative", o.MaxLag)
	case o.PayloadBytes < 0 || o.PayloadBytes > 512<<10:
		return fmt.Errorf("--payload-bytes %d must be between 0 and 524288", o.PayloadBytes)
	}
	if !o.StepUp {
		if o.Duration <= 0 || o.Duration > limit {
			return fmt.Errorf("--duration %s must be more than 0 and at most %s", o.Duration, limit)
		}
		return nil
	}
	if o.StepDuration < time.Second {
		return fmt.Errorf("--step-duration %s must be at least 1s", o.StepDuration)
	}
	if o.MaxRate < o.StartRate {
		return fmt.Errorf("--max-rate %v is below --start-rate %v", o.MaxRate, o.StartRate)
	}
	steps := math.Floor((o.MaxRate-o.StartRate)/o.Step) + 1
	if longest := time.Duration(steps * float64(o.StepDuration)); longest > limit {
		return fmt.Errorf("the step-up could take %s (%v steps of %s), more than %s: raise --step or lower --max-rate or --step-duration",
			longest.Round(time.Second), steps, o.StepDuration, limit)
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
func benchConfig(base *config.Config, id string, o *Options) (*config.Config, error) {
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
`, id, o.Partitions, base.Topics.ReplicationFactor, base.Topics.MaxMessageBytes, benchIntentType, o.Timeout)
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
	cfg.Router.Delivery = o.Delivery
	cfg.Log = base.Log
	cfg.Telemetry = base.Telemetry // the router traces as serve would
	return cfg, nil
}

// load offers the phase's load: a fixed rate for the duration, or the
// step-up. It returns once it released its last intent.
func (ph *phase) load(ctx context.Context, release func(int64, time.Time)) error {
	o := ph.o
	start := ph.clock.Now()
	ph.markStart(start)
	rate := o.Rate
	if o.StepUp {
		rate = o.StartRate
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
	if !o.StepUp {
		s.limit = p.due(start.Add(o.Duration))
		s.run(ctx, p, func(now time.Time, released int64) bool {
			progress(now)
			return released >= s.limit
		})
		ph.markEnd(ph.clock.Now())
		return ctx.Err()
	}

	stepStart, stepEnd := start, start.Add(o.StepDuration)
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
		maxLag := o.MaxLag
		if maxLag == 0 {
			maxLag = int64(math.Ceil(rate))
		}
		st.Held = n > 0 && time.Duration(p99)*time.Millisecond <= o.MaxP99 && st.Lag <= maxLag
		st.Repeat = repeated
		ph.steps = append(ph.steps, st)
		switch {
		case !st.Held && !repeated && o.StepRepeat:
			// One stall (a log roll, a GC, a neighbour's burst) should not
			// decide the knee: a step that did not hold runs once more at
			// the same rate, after the backlog it left has drained.
			repeated = true
			ph.settleBacklog(ctx, maxLag)
			now = ph.clock.Now()
			p.resume(now, released)
			stepStart, stepEnd = now, now.Add(o.StepDuration)
			resultsBefore, releasedBefore = ph.results.Load(), released
			ph.takeStep()
			fmt.Fprintf(ph.stderr, "bench %s: step %d did not hold; repeating %v intents/s once\n", ph.kind, len(ph.steps), rate)
			return false
		case !st.Held:
			ph.stopReason = fmt.Sprintf("the step at %v/s did not hold: p99 %s (limit %s), %d intents without a result (limit %d)",
				rate, time.Duration(p99)*time.Millisecond, o.MaxP99, st.Lag, maxLag)
			return true
		case rate+o.Step > o.MaxRate:
			ph.knee = rate
			ph.stopReason = fmt.Sprintf("reached --max-rate %v/s: the knee is higher", o.MaxRate)
			return true
		}
		ph.knee = rate
		repeated = false
		rate += o.Step
		p.setRate(now, rate)
		stepStart, stepEnd = now, now.Add(o.StepDuration)
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
	limit := ph.clock.Now().Add(ph.o.Timeout + time.Second)
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
	ph.profile = ph.startRecording(ph.o.CPUProfile, "CPU profile", pprof.StartCPUProfile)
	ph.traceFile = ph.startRecording(ph.o.Trace, "execution trace", trace.Start)
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
