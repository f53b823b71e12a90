package main

import (
	"context"
	"io"
	"time"

	"github.com/switchboard-mcp/switchboard/cmd/internal/bench"
)

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
request record; result record minus response record); each hop's
write-to-read time (a dispatch's or a result's record timestamp to when
the agent or the caller read it: under exactly_once, the commit, its
markers and the read_committed fetch); outcomes; the router's peak
pending intents; and the process's CPU and RSS. With a fixed rate the JSON
also has the run second by second (per_second, by when intents were sent:
the observed p50 and p99, each hop's p99, how late the generator was, and
the p99 round trip and queue latencies the router's Kafka clients
reported), so a tail shows whether it comes in bursts and in which hop,
and end_to_end_observed_after_2s: the observed figures of the intents sent
from 2 s into the load, after the start-up seconds that can set a short
run's p99. Record timestamps
are whole milliseconds. A progress line goes to stderr every
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
reports the router's throughput as a fraction of the baseline's. Under
exactly_once the baseline does the router's Kafka work under that
guarantee: one loop reads requests and responses, sends a request's copy
at once and a response's copy in a Kafka transaction with the offsets read,
committed as soon as the last commit returned (group commit), so its
latency is what Kafka's transactions alone cost on this cluster.

It runs against the cluster of --brokers or --config (kafka.properties such
as linger.ms apply to every client), or with --embedded on an in-process
broker (no Kafka needed; its CPU then counts as the process's).`, `  switchboard bench --embedded --rate 500 --duration 5s
  switchboard bench --brokers 127.0.0.1:9092 --delivery at_least_once --rate 1000 --duration 10s --baseline
  switchboard bench --config bench.yaml --step-up --start-rate 1000 --step 1000 --step-duration 3s --max-p99 50ms
  switchboard bench --embedded --rate 200 --service-time 20ms --ignore-rate 0.05 --error-rate 0.01 --timeout 500ms --json`, stderr)
	configPath := fs.String("config", "", "read brokers, Kafka properties, registry and router settings from this YAML `file` (its topics, agents and intents are not used)")
	brokers := fs.String("brokers", "", "Kafka bootstrap `servers` (default: the config's, else $SWITCHBOARD_KAFKA_BOOTSTRAP_SERVERS, else localhost:9092)")
	o := &bench.Options{}
	fs.BoolVar(&o.Embedded, "embedded", false, "run on an in-process broker instead of a cluster")
	fs.Float64Var(&o.Rate, "rate", 1000, "the `rate` to offer, in intents per second")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "how long to offer them")
	fs.BoolVar(&o.StepUp, "step-up", false, "raise the rate step by step until it no longer holds, and report the knee")
	fs.Float64Var(&o.StartRate, "start-rate", 1000, "--step-up: the first step's `rate` (intents/s)")
	fs.Float64Var(&o.Step, "step", 1000, "--step-up: what each step adds to the `rate` (intents/s)")
	fs.DurationVar(&o.StepDuration, "step-duration", 5*time.Second, "--step-up: how long each step lasts")
	fs.DurationVar(&o.MaxP99, "max-p99", 500*time.Millisecond, "--step-up: a step holds while the p99 of its end-to-end latency is at most this `duration`")
	fs.BoolVar(&o.StepRepeat, "step-repeat", true, "--step-up: run a step that did not hold once more at the same rate before calling the knee (one stall does not decide it)")
	fs.Int64Var(&o.MaxLag, "max-lag", 0, "--step-up: … and at most this many `intents` have no result at its end (0: one second of the step's rate)")
	fs.Float64Var(&o.MaxRate, "max-rate", 50000, "--step-up: stop after the step at this `rate` (intents/s)")
	fs.DurationVar(&o.ServiceTime, "service-time", 0, "how long the demo agent takes per intent")
	fs.Float64Var(&o.IgnoreRate, "ignore-rate", 0, "the `fraction` of intents the agent never answers (they time out and get the static fallback)")
	fs.Float64Var(&o.ErrorRate, "error-rate", 0, "the `fraction` of answered intents the agent fails (outcome agent_error)")
	fs.DurationVar(&o.Timeout, "timeout", 2*time.Second, "the bench intent type's timeout")
	fs.BoolVar(&o.Baseline, "baseline", false, "also run the raw Kafka baseline, after the router, and compare")
	fs.BoolVar(&o.JSON, "json", false, "print the report as JSON")
	fs.IntVar(&o.Partitions, "partitions", 0, "`partitions` of the bench's topics (default: the config's topics.partitions, 6)")
	fs.StringVar(&o.Delivery, "delivery", "", "the router's delivery `guarantee`: exactly_once or at_least_once (default: the config's router.delivery, exactly_once)")
	fs.IntVar(&o.PayloadBytes, "payload-bytes", 100, "approximate size of each intent's payload, in `bytes`")
	fs.BoolVar(&o.KeepTopics, "keep-topics", false, "leave the bench's topics and consumer groups on the cluster")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of this process during the router's load to this `file` (go tool pprof)")
	fs.StringVar(&o.Trace, "trace", "", "write an execution trace of this process during the router's load to this `file` (go tool trace: scheduling latency, GC pauses, blocking)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := o.Check(*brokers); err != nil {
		return err
	}
	base, err := (&conn{config: configPath, brokers: brokers, registry: new(string)}).load()
	if err != nil {
		return err
	}
	return bench.Run(ctx, o, bench.Wiring{
		Base: base, Settings: settingsOf, Codec: codecFor,
		Log: newLogger(stderr, "warn", base.Log.Format),
	}, stdout, stderr)
}
