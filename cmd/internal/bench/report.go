package bench

import (
	"encoding/json"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// benchReport is what 'switchboard bench' prints: the settings, the machine,
// and a phaseReport for the router and, with --baseline, the baseline.
type benchReport struct {
	Date             string          `json:"date"`
	Machine          machine         `json:"machine"`
	Brokers          string          `json:"brokers"`
	Embedded         bool            `json:"embedded"`
	Delivery         string          `json:"delivery"`
	CommitIntervalMs float64         `json:"commit_interval_ms,omitempty"`
	Partitions       int             `json:"partitions"`
	Encoding         string          `json:"encoding"`
	LingerMs         string          `json:"linger_ms"`
	Mode             string          `json:"mode"` // fixed or step_up
	RatePerS         float64         `json:"rate_per_s,omitempty"`
	DurationS        float64         `json:"duration_s,omitempty"`
	StepUp           *stepUpSettings `json:"step_up,omitempty"`
	ServiceTimeMs    float64         `json:"service_time_ms"`
	IgnoreRate       float64         `json:"ignore_rate"`
	ErrorRate        float64         `json:"error_rate"`
	TimeoutMs        float64         `json:"intent_timeout_ms"`
	PayloadBytes     int             `json:"payload_bytes"`
	Router           *phaseReport    `json:"router"`
	Baseline         *phaseReport    `json:"baseline,omitempty"`
	// Fraction is the router's throughput as a fraction of the baseline's:
	// of their knees with --step-up, else of their achieved rates.
	Fraction      *float64 `json:"router_throughput_fraction_of_baseline,omitempty"`
	FractionBasis string   `json:"fraction_basis,omitempty"`
	Notes         []string `json:"notes,omitempty"`
}

type stepUpSettings struct {
	StartRate     float64 `json:"start_rate_per_s"`
	Step          float64 `json:"step_per_s"`
	StepDurationS float64 `json:"step_duration_s"`
	MaxP99Ms      float64 `json:"max_p99_ms"`
	MaxLag        int64   `json:"max_lag"` // 0: one second of the step's rate
	MaxRate       float64 `json:"max_rate_per_s"`
}

// phaseReport is one phase's figures. Latencies are in milliseconds.
type phaseReport struct {
	TopicPrefix     string                  `json:"topic_prefix"`
	OfferedPerS     float64                 `json:"offered_per_s"`
	AchievedPerS    float64                 `json:"achieved_per_s"`       // results read per second of the load window, after its first second (baseline: ignored intents count when the agent read them)
	LoadStart       string                  `json:"load_start,omitempty"` // when the load started (RFC 3339, UTC): to line the per-second series up with the broker's log
	LoadS           float64                 `json:"load_s"`
	DrainS          float64                 `json:"drain_s"`
	Sent            int64                   `json:"sent"`
	SendErrors      int64                   `json:"send_errors"`
	FirstSendError  string                  `json:"first_send_error,omitempty"`
	Results         int64                   `json:"results"`
	Missing         int64                   `json:"missing"`    // sent, and no result when the drain ended
	Duplicates      int64                   `json:"duplicates"` // results beyond an intent's first
	Ignored         int64                   `json:"ignored"`    // sent asking the agent not to answer
	Outcomes        map[string]int64        `json:"outcomes"`
	Latency         latencies               `json:"latency_ms"`
	ByOutcome       map[string]latencyStats `json:"end_to_end_by_outcome_ms"`     // end to end (record timestamps), per outcome
	PeakPending     *int64                  `json:"peak_pending,omitempty"`       // the router's switchboard_intents_pending
	FetchPaused     *float64                `json:"fetch_paused_share,omitempty"` // of the 100ms samples in which the router had paused fetching
	PeakInFlight    int64                   `json:"peak_in_flight"`               // sent without a result, sampled every 100ms
	ProcessCPUCores float64                 `json:"process_cpu_cores"`            // CPU seconds per second of the load window
	HostCPUBusy     float64                 `json:"host_cpu_busy"`                // fraction of all the machine's cores
	RSSStartMiB     float64                 `json:"rss_start_mib"`
	RSSPeakMiB      float64                 `json:"rss_peak_mib"`
	RouterMetrics   map[string]float64      `json:"router_metrics,omitempty"`
	// BrokerPerIntent is what each intent sent cost the broker, from the
	// router's (baseline: the forwarders') clients' librdkafka statistics
	// from the load's start to after the drain.
	BrokerPerIntent *brokerCost  `json:"broker_per_intent,omitempty"`
	Steps           []stepReport `json:"steps,omitempty"`
	// PerSecond is a fixed-rate load second by second (by when its intents
	// were sent): whether its tail comes in bursts, and in which hop.
	PerSecond  []secondReport `json:"per_second,omitempty"`
	KneePerS   *float64       `json:"knee_per_s,omitempty"`
	StopReason string         `json:"stop_reason,omitempty"`
}

// latencies are the bench's latency figures. Those from record timestamps
// have a resolution of 1ms; "observed" ones are read from this process's
// clock when a record was handed to the producer or came out of a consumer.
type latencies struct {
	EndToEnd         latencyStats `json:"end_to_end"`          // result record − request record
	EndToEndObserved latencyStats `json:"end_to_end_observed"` // result read − request sent
	// EndToEndObservedSettled is EndToEndObserved of the intents sent
	// from the load's settleTime on (fixed rate only): the first seconds
	// after the router and its clients started (new topics, first
	// transactions, fetch sessions) are slower than the rest, and in a
	// 10 s run they alone can set the p99. Both are reported; the
	// per-second series shows the difference.
	EndToEndObservedSettled *latencyStats `json:"end_to_end_observed_after_2s,omitempty"`
	RequestToDispatch       latencyStats  `json:"request_to_dispatch"`       // dispatch record − request record
	ResponseToResult        latencyStats  `json:"response_to_result"`        // result record − response record
	PublishToAgent          latencyStats  `json:"publish_to_agent_observed"` // dispatch read by the agent − request sent
	AgentToResult           latencyStats  `json:"agent_to_result_observed"`  // result read − response sent
	// A hop's write-to-read time: from a record's timestamp (set when its
	// producer was handed it) to when its read_committed reader had it.
	// Under exactly_once that is the router's commit, the markers and the
	// reader's fetch; under at_least_once the linger, the produce and the
	// fetch. The timestamp's 1 ms resolution makes them up to 1 ms long.
	DispatchToAgent latencyStats `json:"dispatch_to_agent"` // dispatch read by the agent − dispatch record
	ResultToCaller  latencyStats `json:"result_to_caller"`  // result read − result record
	GeneratorLag    latencyStats `json:"generator_lag"`     // request sent − its scheduled time
	// The router's own share, in µs resolution, from its histogram
	// switchboard_router_record_seconds: poll to outputs handed to the
	// producer (no Kafka hop in it). Quantiles are interpolated within the
	// histogram's buckets; Max is the upper bound of the highest bucket used.
	InRouterRequest  latencyStats `json:"in_router_request"`
	InRouterResponse latencyStats `json:"in_router_response"`
}

type latencyStats struct {
	N    uint64  `json:"n"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

type stepReport struct {
	Rate      float64 `json:"rate_per_s"`
	Released  int64   `json:"sent"`
	Results   int64   `json:"results"` // read during the step
	Achieved  float64 `json:"achieved_per_s"`
	LiveP99Ms float64 `json:"p99_ms"`                // of the results read during the step: what decided
	Lag       int64   `json:"without_result_at_end"` // sent and without a result at the step's end
	Held      bool    `json:"held"`
	Repeat    bool    `json:"repeat,omitempty"` // a second run at a rate whose first step did not hold
	SentP50Ms float64 `json:"sent_p50_ms"`      // of the intents sent during the step, once the run ended (observed)
	SentP99Ms float64 `json:"sent_p99_ms"`

	startUs, endUs int32
}

func ms(us int64) float64 { return float64(us) / 1000 }

func mib(b int64) float64 { return math.Round(float64(b)/(1<<20)*10) / 10 }

// stats summarises a histogram of milliseconds (msPerUnit 1: the record
// timestamps' differences, exact up to 2,048 ms) or of microseconds
// (msPerUnit 0.001: what this process's clock observed).
func stats(h *histogram, msPerUnit float64) latencyStats {
	q := func(v int64) float64 { return float64(v) * msPerUnit }
	return latencyStats{
		N: h.count(), P50: q(h.quantile(0.5)), P90: q(h.quantile(0.9)), P99: q(h.quantile(0.99)),
		P999: q(h.quantile(0.999)), Max: q(h.max), Mean: math.Round(h.mean()*msPerUnit*1000) / 1000,
	}
}

const (
	msUnits = 1     // a histogram of milliseconds
	usUnits = 0.001 // a histogram of microseconds
)

func newBenchReport(o *Options, base *config.Config) *benchReport {
	r := &benchReport{
		Date: time.Now().UTC().Format(time.RFC3339), Machine: thisMachine(), Brokers: base.Kafka.BootstrapServers,
		Embedded: o.Embedded, Delivery: o.Delivery, Partitions: o.Partitions,
		ServiceTimeMs: ms(o.ServiceTime.Microseconds()), IgnoreRate: o.IgnoreRate, ErrorRate: o.ErrorRate,
		TimeoutMs: ms(o.Timeout.Microseconds()), PayloadBytes: o.PayloadBytes, LingerMs: strconv.Itoa(kafkaio.DefaultLingerMs) + " (Switchboard's default)",
	}
	if o.Embedded {
		r.Brokers = "embedded"
	}
	for _, k := range []string{"linger.ms", "queue.buffering.max.ms"} {
		if v, ok := base.Kafka.Properties[k]; ok {
			r.LingerMs = v
		}
	}
	if o.Delivery == config.ExactlyOnce {
		r.CommitIntervalMs = ms(base.Router.CommitInterval.D().Microseconds())
	}
	if o.StepUp {
		r.Mode = "step_up"
		r.StepUp = &stepUpSettings{
			StartRate: o.StartRate, Step: o.Step, StepDurationS: o.StepDuration.Seconds(),
			MaxP99Ms: ms(o.MaxP99.Microseconds()), MaxLag: o.MaxLag, MaxRate: o.MaxRate,
		}
	} else {
		r.Mode, r.RatePerS, r.DurationS = "fixed", o.Rate, o.Duration.Seconds()
	}
	r.Notes = append(r.Notes, "process CPU and RSS are of this one process: the router (or the baseline's forwarders), the agent, the load generator and the readers"+
		map[bool]string{true: ", and the embedded broker", false: ""}[o.Embedded])
	return r
}

// report analyses the phase's rows once everything has stopped.
func (ph *phase) report() *phaseReport {
	const (
		e2e = iota
		e2eObs
		reqDisp
		respRes
		pubAgent
		agentRes
		dispVis
		resVis
		genLag
		nHist
	)
	var h [nHist]histogram
	byOutcome := make([]histogram, len(intents.Outcomes))
	pr := &phaseReport{
		TopicPrefix: "bench." + ph.id + ".", LoadS: ph.loadEnd.Sub(ph.loadStart).Seconds(), DrainS: ph.drainTook.Seconds(),
		SendErrors: ph.sendErrs.Load(), Duplicates: ph.dups.Load(), Outcomes: map[string]int64{},
		PeakInFlight: ph.peakInFlight.Load(), RSSStartMiB: mib(ph.rssStart), RSSPeakMiB: mib(ph.peakRSS.Load()),
		Steps: ph.steps, StopReason: ph.stopReason,
	}
	if s, ok := ph.firstErr.Load().(string); ok {
		pr.FirstSendError = s
	}
	if !ph.loadStart.IsZero() {
		pr.LoadStart = ph.loadStart.UTC().Format(time.RFC3339Nano)
	}
	if pr.LoadS > 0 {
		pr.ProcessCPUCores = math.Round((ph.cpuEnd-ph.cpuStart).Seconds()/pr.LoadS*100) / 100
	}
	pr.HostCPUBusy = math.Round(ph.hostEnd.busySince(ph.hostStart)*100) / 100
	if ph.reg != nil {
		v := ph.peakPending.Load()
		pr.PeakPending = &v
		if n := ph.samples.Load(); n > 0 {
			f := math.Round(float64(ph.pausedSamples.Load())/float64(n)*1000) / 1000
			pr.FetchPaused = &f
		}
		pr.RouterMetrics = metricValues(ph.reg)
	}
	pr.BrokerPerIntent = ph.statsEnd.sub(ph.statsStart).perIntent(ph.sent.Load())
	if ph.o.StepUp {
		k := ph.knee
		pr.KneePerS = &k
	}

	// Achieved throughput counts the results read in the load window after
	// its first second (or fifth, if shorter): in a steady state that is the
	// offered rate whatever the latency, and under overload the service rate.
	skip := min(time.Second, ph.loadEnd.Sub(ph.loadStart)/5)
	windowStart, windowEnd := ph.us(ph.loadStart.Add(skip)), ph.us(ph.loadEnd)
	inWindow := func(us int32) bool { return us >= windowStart && us <= windowEnd }
	answered, agentError := outcomeIndex[schemas.OutcomeAnswered], outcomeIndex[schemas.OutcomeAgentError]
	stepHists := make([]histogram, len(ph.steps))
	var ser *series
	if !ph.o.StepUp {
		ser = newSeries(int64(ph.us(ph.loadStart)))
	}
	var settled histogram
	settledFrom := int64(ph.us(ph.loadStart.Add(settleTime)))
	step := 0
	var completed int64
	for seq := range ph.released.Load() {
		r := ph.rows.at(seq)
		if r == nil {
			continue
		}
		sent := int64(r.sent.Load())
		if sent <= 0 {
			continue
		}
		pr.Sent++
		ign := ignored(seq, ph.o.IgnoreRate)
		if ign {
			pr.Ignored++
		}
		req := int64(r.req.Load())
		lag := sent - int64(r.due.Load())
		h[genLag].record(lag)
		var sec *secondHists
		if ser != nil {
			if sec = ser.at(sent); sec != nil {
				sec.sent++
				sec.lagMax = max(sec.lagMax, lag)
			}
		}
		if d := int64(r.disp.Load()); d > 0 {
			h[reqDisp].record((d - req) / 1000)
			h[pubAgent].record(int64(r.dispSeen.Load()) - sent)
			h[dispVis].record(max(int64(r.dispSeen.Load())-d, 0))
			if sec != nil {
				sec.h[sReqDisp].record((d - req) / 1000)
				sec.h[sDispAgent].record(max(int64(r.dispSeen.Load())-d, 0) / 1000)
			}
		}
		res := int64(r.res.Load())
		if res == 0 {
			switch {
			case ph.kind == phaseRouter || !ign:
				pr.Missing++
			case inWindow(r.dispSeen.Load()):
				completed++ // in the baseline an ignored intent's journey ends at the agent
			}
			continue
		}
		pr.Results++
		oc := r.outcome.Load()
		pr.Outcomes[string(intents.Outcomes[oc-1])]++
		seen := int64(r.resSeen.Load())
		if inWindow(int32(seen)) {
			completed++
		}
		h[e2e].record((res - req) / 1000)
		byOutcome[oc-1].record((res - req) / 1000)
		h[e2eObs].record(seen - sent)
		h[resVis].record(max(seen-res, 0))
		if ser != nil && sent >= settledFrom {
			settled.record(seen - sent)
		}
		if sec != nil {
			sec.h[sE2E].record((seen - sent) / 1000)
			sec.h[sResCaller].record(max(seen-res, 0) / 1000)
		}
		if resp := int64(r.resp.Load()); resp > 0 && (oc == answered || oc == agentError) {
			h[respRes].record((res - resp) / 1000)
			h[agentRes].record(seen - int64(r.respSent.Load()))
			if sec != nil {
				sec.h[sRespRes].record((res - resp) / 1000)
			}
		}
		due := r.due.Load()
		for step < len(ph.steps) && due >= ph.steps[step].endUs {
			step++
		}
		if step < len(ph.steps) && due >= ph.steps[step].startUs {
			stepHists[step].record((seen - sent) / 1000) // as observed, like the step rule
		}
	}
	for i := range pr.Steps {
		pr.Steps[i].SentP50Ms, pr.Steps[i].SentP99Ms = float64(stepHists[i].quantile(0.5)), float64(stepHists[i].quantile(0.99))
	}
	if pr.LoadS > 0 {
		pr.OfferedPerS = math.Round(float64(pr.Sent+pr.SendErrors)/pr.LoadS*10) / 10
		pr.AchievedPerS = math.Round(float64(completed)/(pr.LoadS-skip.Seconds())*10) / 10
	}
	if ser != nil {
		pr.PerSecond = ser.report(ph.stats.latencies(), ph.epochUs)
	}
	pr.ByOutcome = map[string]latencyStats{}
	for i := range byOutcome {
		if byOutcome[i].count() > 0 {
			pr.ByOutcome[string(intents.Outcomes[i])] = stats(&byOutcome[i], msUnits)
		}
	}
	pr.Latency = latencies{
		EndToEnd: stats(&h[e2e], msUnits), EndToEndObserved: stats(&h[e2eObs], usUnits),
		RequestToDispatch: stats(&h[reqDisp], msUnits), ResponseToResult: stats(&h[respRes], msUnits),
		PublishToAgent: stats(&h[pubAgent], usUnits), AgentToResult: stats(&h[agentRes], usUnits),
		DispatchToAgent: stats(&h[dispVis], usUnits), ResultToCaller: stats(&h[resVis], usUnits),
		GeneratorLag: stats(&h[genLag], usUnits),
	}
	if settled.count() > 0 {
		st := stats(&settled, usUnits)
		pr.Latency.EndToEndObservedSettled = &st
	}
	if ph.reg != nil {
		pr.Latency.InRouterRequest = promStats(ph.reg, "switchboard_router_record_seconds", "topic", "requests")
		pr.Latency.InRouterResponse = promStats(ph.reg, "switchboard_router_record_seconds", "topic", "responses")
	}
	return pr
}

// promStats summarises, in milliseconds, the series label=value of a
// Prometheus histogram of seconds, interpolating quantiles linearly within
// its buckets.
func promStats(g prometheus.Gatherer, name, label, value string) latencyStats {
	mfs, err := g.Gather()
	if err != nil {
		return latencyStats{}
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !hasLabel(m.GetLabel(), label, value) || m.GetHistogram() == nil {
				continue
			}
			return histStats(m.GetHistogram())
		}
	}
	return latencyStats{}
}

func hasLabel(lps []*dto.LabelPair, name, value string) bool {
	for _, lp := range lps {
		if lp.GetName() == name && lp.GetValue() == value {
			return true
		}
	}
	return false
}

func histStats(h *dto.Histogram) latencyStats {
	n := h.GetSampleCount()
	if n == 0 {
		return latencyStats{}
	}
	buckets := h.GetBucket()
	q := func(phi float64) float64 {
		rank := phi * float64(n)
		lower, below := 0.0, uint64(0)
		for _, b := range buckets {
			upper, cum := b.GetUpperBound(), b.GetCumulativeCount()
			if float64(cum) >= rank {
				in := cum - below
				if in == 0 {
					return upper * 1000
				}
				return (lower + (upper-lower)*(rank-float64(below))/float64(in)) * 1000
			}
			lower, below = upper, cum
		}
		return lower * 1000 // beyond the last bucket: its bound, a floor
	}
	top := 0.0
	below := uint64(0)
	for _, b := range buckets {
		if b.GetCumulativeCount() > below {
			top = b.GetUpperBound()
		}
		below = b.GetCumulativeCount()
	}
	if below < n && len(buckets) > 0 {
		top = buckets[len(buckets)-1].GetUpperBound() // beyond the last bucket: a floor
	}
	round := func(v float64) float64 { return math.Round(v*1000) / 1000 }
	return latencyStats{
		N: n, P50: round(q(0.5)), P90: round(q(0.9)), P99: round(q(0.99)), P999: round(q(0.999)),
		Max: round(top * 1000), Mean: round(h.GetSampleSum() / float64(n) * 1000),
	}
}

// metricValues flattens the router's counters and gauges (not zero) into
// name{label="value",…} → value, and its histograms into their _count and
// _sum.
func metricValues(g prometheus.Gatherer) map[string]float64 {
	mfs, err := g.Gather()
	if err != nil {
		return nil
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := ""
			if len(m.GetLabel()) > 0 {
				var ls []string
				for _, l := range m.GetLabel() {
					ls = append(ls, l.GetName()+"="+strconv.Quote(l.GetValue()))
				}
				labels = "{" + strings.Join(ls, ",") + "}"
			}
			put := func(name string, v float64) {
				if v != 0 {
					out[name+labels] = v
				}
			}
			switch {
			case m.GetCounter() != nil:
				put(mf.GetName(), m.GetCounter().GetValue())
			case m.GetGauge() != nil:
				put(mf.GetName(), m.GetGauge().GetValue())
			case m.GetHistogram() != nil:
				put(mf.GetName()+"_count", float64(m.GetHistogram().GetSampleCount()))
				put(mf.GetName()+"_sum", m.GetHistogram().GetSampleSum())
			}
		}
	}
	return out
}

// compare states the router's throughput as a fraction of the baseline's.
func (r *benchReport) compare() {
	if r.Router == nil || r.Baseline == nil {
		return
	}
	if r.StepUp != nil {
		if r.Baseline.KneePerS != nil && *r.Baseline.KneePerS > 0 {
			f := math.Round(*r.Router.KneePerS / *r.Baseline.KneePerS * 100) / 100
			r.Fraction, r.FractionBasis = &f, "knee"
		}
		return
	}
	if r.Baseline.AchievedPerS > 0 {
		f := math.Round(r.Router.AchievedPerS/r.Baseline.AchievedPerS*100) / 100
		r.Fraction, r.FractionBasis = &f, "achieved"
		if r.Router.AchievedPerS >= 0.95*r.Router.OfferedPerS && r.Baseline.AchievedPerS >= 0.95*r.Baseline.OfferedPerS {
			r.Notes = append(r.Notes, "both kept up with the offered rate, so the fraction says little about capacity: --step-up --baseline compares knees")
		}
	}
}

func (r *benchReport) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
