package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/router/telemetry"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// The two things a bench phase can measure.
const (
	phaseRouter   = "router"   // Switchboard's router
	phaseBaseline = "baseline" // plain consume-produce loops over the same four hops
)

// benchIntentType is the one intent type (and agent) a bench routes.
const benchIntentType = "bench"

// row is what the bench learns of one intent, as microseconds since the
// phase's epoch (0: not yet). Record timestamps are whole milliseconds.
type row struct {
	due, sent      atomic.Int32 // scheduled; handed to the producer (-1: the send failed)
	req            atomic.Int32 // the request record's timestamp
	disp, dispSeen atomic.Int32 // the dispatch record's timestamp; when the agent read it
	resp, respSent atomic.Int32 // the response record's timestamp; when the agent sent it
	res, resSeen   atomic.Int32 // the result record's timestamp; when the bench read it
	outcome        atomic.Int32 // 1 + the index in intents.Outcomes
	results        atomic.Int32 // results read for this intent
}

const (
	rowChunkBits = 16
	rowChunks    = 1 << 14
)

// rows holds the intents of a phase by sequence number. Only the schedule
// goroutine adds rows (make); any goroutine may look one up (at).
type rows struct {
	chunks [rowChunks]atomic.Pointer[[1 << rowChunkBits]row]
}

func (t *rows) make(seq int64) *row {
	c := seq >> rowChunkBits
	if c >= rowChunks {
		return nil
	}
	ch := t.chunks[c].Load()
	if ch == nil {
		ch = new([1 << rowChunkBits]row)
		t.chunks[c].Store(ch)
	}
	return &ch[seq&(1<<rowChunkBits-1)]
}

func (t *rows) at(seq int64) *row {
	c := seq >> rowChunkBits
	if seq < 0 || c >= rowChunks {
		return nil
	}
	ch := t.chunks[c].Load()
	if ch == nil {
		return nil
	}
	return &ch[seq&(1<<rowChunkBits-1)]
}

// phase runs one measurement: its own topics (prefix bench.<id>.), consumer
// groups, router or forwarders, agent, publisher and readers, so that runs
// never mix. It owns every goroutine it starts.
type phase struct {
	kind  string
	o     *Options
	cfg   *config.Config
	codec *schemas.Codec
	kafka kafkaio.Settings
	// settingsOf builds a client's settings from a configuration (the
	// command's wiring).
	settingsOf func(*config.Config, string) kafkaio.Settings
	id         string
	stderr     io.Writer
	log        *slog.Logger
	clock      clockwork.Clock

	epochUs int64 // unix µs of the phase's time zero, a whole millisecond
	rows    rows
	payload []byte // the padding every payload carries

	rssStart   int64
	released   atomic.Int64 // intents handed to the publisher
	ignoredRel atomic.Int64 // … of which the agent ignores (counted in the baseline only)
	sent       atomic.Int64 // acknowledged by the broker
	sendErrs   atomic.Int64
	firstErr   atomic.Value // string: the first send error
	results    atomic.Int64 // first results of measured intents
	dups       atomic.Int64 // further results of an intent
	probesSeen atomic.Int64
	pubWG      sync.WaitGroup
	inflight   chan struct{} // bounds the sends in flight

	loadStart, loadEnd time.Time // the load window (set by the load)
	cpuStart, cpuEnd   time.Duration
	profile            *os.File // --cpuprofile, while the load runs
	traceFile          *os.File // --trace, while the load runs
	hostStart, hostEnd hostCPU
	drainStart         time.Time
	drainTook          time.Duration
	steps              []stepReport // --step-up
	knee               float64      // --step-up: the last rate that held
	stopReason         string       // --step-up: why it stopped

	mu   sync.Mutex // guards live and step
	live histogram  // end to end as observed (sent to read, ms), every result so far
	step histogram  // the same, results of the current step

	reg           *prometheus.Registry // the router's metrics (router phase only)
	peakPending   atomic.Int64
	samples       atomic.Int64 // of the router's gauges, every 100ms
	pausedSamples atomic.Int64 // … in which switchboard_fetch_paused was 1
	peakInFlight  atomic.Int64
	peakRSS       atomic.Int64

	stats                *brokerStats // the router's (forwarders') clients' librdkafka statistics
	statsStart, statsEnd clientStats  // at the load's start; after the drain
}

func newPhase(kind, id string, o *Options, cfg *config.Config, codec *schemas.Codec,
	settingsOf func(*config.Config, string) kafkaio.Settings, stderr io.Writer, log *slog.Logger,
) *phase {
	ph := &phase{
		kind: kind, o: o, cfg: cfg, codec: codec, settingsOf: settingsOf, kafka: settingsOf(cfg, "switchboard-bench"),
		id: id, stderr: stderr, log: log, clock: clockwork.NewRealClock(),
		inflight: make(chan struct{}, 1<<16), stats: &brokerStats{},
	}
	// The router's clients (and the forwarders') report their statistics:
	// broker requests, records and bytes per intent.
	ph.kafka.Properties = maps.Clone(ph.kafka.Properties)
	if ph.kafka.Properties == nil {
		ph.kafka.Properties = map[string]string{}
	}
	ph.kafka.Properties["statistics.interval.ms"] = strconv.Itoa(int(statsInterval.Milliseconds()))
	ph.kafka.Stats = ph.stats.add
	now := ph.clock.Now()
	ph.epochUs = (now.UnixMilli() - 1000) * 1000
	pad := make([]byte, max(o.PayloadBytes-40, 0))
	for i := range pad {
		pad[i] = 'x'
	}
	ph.payload = pad
	return ph
}

func (ph *phase) us(t time.Time) int32 { return int32(t.UnixMicro() - ph.epochUs) }
func (ph *phase) msTs(ms int64) int32  { return int32(ms*1000 - ph.epochUs) }

// seqOf reads a bench intent id, <id>-<seq> (or <id>-w<n> for a warm-up
// probe).
func (ph *phase) seqOf(key []byte) (seq int64, probe, ok bool) {
	n := len(ph.id)
	if len(key) < n+2 || string(key[:n]) != ph.id || key[n] != '-' {
		return 0, false, false
	}
	if key[n+1] == 'w' {
		return 0, true, true
	}
	seq, err := strconv.ParseInt(string(key[n+1:]), 10, 64)
	return seq, false, err == nil
}

func (ph *phase) rowOf(key []byte) *row {
	seq, probe, ok := ph.seqOf(key)
	if !ok || probe {
		return nil
	}
	return ph.rows.at(seq)
}

// ignored says whether intent seq asks the agent not to answer: exactly a
// fraction ignoreRate of intents, spread evenly.
func ignored(seq int64, rate float64) bool {
	if rate <= 0 {
		return false
	}
	return int64(float64(seq+1)*rate) > int64(float64(seq)*rate)
}

func (ph *phase) intent(id string, seq int64, ignore bool) ([]byte, error) {
	p := make([]byte, 0, len(ph.payload)+64)
	p = append(p, `{"seq":`...)
	p = strconv.AppendInt(p, seq, 10)
	if ignore {
		p = append(p, `,"demo":{"ignore":true}`...)
	}
	p = append(p, `,"pad":"`...)
	p = append(p, ph.payload...)
	p = append(p, `"}`...)
	return ph.codec.Encode(ph.cfg.Topics.Requests, &schemas.IntentRequest{IntentID: id, IntentType: benchIntentType, Payload: schemas.JSON(p)})
}

// run sets the phase up, warms it up, offers the load (load returns when it
// has released its last intent), waits for the results and tears down.
func (ph *phase) run(ctx context.Context, load func(ctx context.Context, release func(seq int64, due time.Time)) error) error {
	plans := ph.cfg.TopicPlans()
	if ph.kind == phaseBaseline {
		var keep []config.TopicPlan
		for _, p := range plans {
			switch p.Role {
			case "requests", "responses", "results", "agents." + benchIntentType:
				keep = append(keep, p)
			}
		}
		plans = keep
	}
	if _, err := kafkaio.EnsureTopics(ctx, ph.kafka, plans, true); err != nil {
		return fmt.Errorf("%w (is a Kafka broker running at %s? --embedded needs none)", err, ph.kafka.Bootstrap)
	}
	if !ph.o.KeepTopics {
		defer ph.deleteTopics(plans)
	}

	// Shutdown order: the load ends (no new intents), the drain waits for
	// the results; then ctx is cancelled, the publisher's sends end, every
	// part stops (the router commits and closes, the agent finishes what it
	// holds), and last the producers close.
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg        sync.WaitGroup
		pub       *kafkaio.Producer
		agentProd *kafkaio.Producer
	)
	defer func() {
		cancel()
		ph.pubWG.Wait()
		wg.Wait()
		if pub != nil {
			pub.Close(5 * time.Second)
		}
		if agentProd != nil {
			agentProd.Close(5 * time.Second)
		}
	}()
	partErr := make(chan error, 8)
	part := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && !errors.Is(err, context.Canceled) {
				partErr <- fmt.Errorf("%s: %w", name, err)
				cancel()
			}
		}()
	}
	failed := func(err error) error {
		select {
		case perr := <-partErr:
			return perr
		default:
			return err
		}
	}

	if ph.kind == phaseRouter {
		traces, err := telemetry.New(ph.cfg.Telemetry.Traces, telemetry.WithComponent("bench", ""))
		if err != nil {
			return err
		}
		defer traces.Flush(ph.log)
		r, err := ph.newRouter(ctx, router.WithTracerProvider(traces.OrNil()))
		if err != nil {
			return err
		}
		part("router", r.Run)
	} else if ph.cfg.Router.Delivery == config.ExactlyOnce {
		part("transactional forwarder", ph.forwardTx)
	} else {
		part("request forwarder", func(ctx context.Context) error {
			return ph.forward(ctx, "-fwd-requests", ph.cfg.Topics.Requests, ph.cfg.Agents[benchIntentType].Topic)
		})
		part("response forwarder", func(ctx context.Context) error {
			return ph.forward(ctx, "-fwd-responses", ph.cfg.Topics.Responses, ph.cfg.Topics.Results)
		})
	}
	agent, err := ph.newAgent()
	if err != nil {
		return err
	}
	agentProd = agent.prod
	part("agent", agent.run)
	ready := make(chan struct{})
	part("results reader", func(ctx context.Context) error {
		return kafkaio.Read(ctx, ph.kafka, kafkaio.Reading{Topics: []string{ph.cfg.Topics.Results}, From: kafkaio.FromBeginning(), OnStart: func(kafkaio.Offsets) { close(ready) }}, ph.onResult)
	})
	part("sampler", ph.sample)
	if pub, err = kafkaio.NewProducer(ph.settingsOf(ph.cfg, "switchboard-bench-publisher")); err != nil {
		return err
	}

	select {
	case <-ready:
	case <-ctx.Done():
		return failed(ctx.Err())
	}
	if err := ph.warmUp(ctx, pub); err != nil {
		return failed(err)
	}
	if err := load(ctx, ph.release(ctx, pub)); err != nil {
		return failed(err)
	}
	ph.pubWG.Wait()
	ph.drain(ctx)
	ph.statsEnd = ph.settleStats(ctx)
	if ctx.Err() != nil {
		return failed(ctx.Err())
	}
	cancel()
	wg.Wait()
	return failed(nil)
}

// drain waits, for up to the intent timeout plus 5s, until every intent sent
// has its result (in the baseline: every intent the agent answers).
func (ph *phase) drain(ctx context.Context) {
	start := ph.clock.Now()
	ph.drainStart = start
	defer func() { ph.drainTook = ph.clock.Since(start) }()
	want := ph.expected()
	if ph.results.Load() >= want {
		return
	}
	limit := ph.o.Timeout + 5*time.Second
	t := ph.clock.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	next := start.Add(time.Second)
	for ph.results.Load() < want {
		select {
		case <-ctx.Done():
			return
		case now := <-t.Chan():
			if now.Sub(start) >= limit {
				return
			}
			if !now.Before(next) {
				next = next.Add(time.Second)
				fmt.Fprintf(ph.stderr, "bench %s: draining, %d of %d results in\n", ph.kind, ph.results.Load(), want)
			}
		}
	}
}

// expected is how many results the intents sent should get: all of them
// through the router; in the baseline, which has no timeouts, not those the
// agent ignores.
func (ph *phase) expected() int64 {
	n := ph.sent.Load()
	if ph.kind == phaseBaseline {
		n -= ph.ignoredSent()
	}
	return n
}

// ignoredSent counts the intents sent that ask the agent not to answer.
func (ph *phase) ignoredSent() int64 {
	var n int64
	if ph.o.IgnoreRate == 0 {
		return 0
	}
	for seq := range ph.released.Load() {
		if r := ph.rows.at(seq); r != nil && r.sent.Load() > 0 && ignored(seq, ph.o.IgnoreRate) {
			n++
		}
	}
	return n
}

// newRouter builds the router as 'switchboard serve' does, with its metrics
// in a registry of the phase's own.
func (ph *phase) newRouter(ctx context.Context, opts ...router.Option) (*router.Router, error) {
	ph.reg = prometheus.NewRegistry()
	parts, err := kafkaio.RouterParts(ctx, ph.kafka, ph.cfg, ph.codec)
	if err != nil {
		return nil, err
	}
	ropts := []router.Option{
		router.WithRestorer(parts.Restorer), router.WithFallbackFeed(parts.Feed),
		router.WithLogger(ph.log), router.WithRegisterer(ph.reg),
	}
	r, err := router.New(ph.cfg, ph.codec, parts.Source, parts.Sink, append(ropts, opts...)...)
	if err != nil {
		_ = parts.Source.Close()
		_ = parts.Sink.Close()
		return nil, err
	}
	return r, nil
}

// warmUp sends a few probe intents and waits for their results: the router
// (or the forwarders), the agent and the reader are all working before the
// measured load starts.
func (ph *phase) warmUp(ctx context.Context, pub *kafkaio.Producer) error {
	const limit = 60 * time.Second
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	n := int64(max(2*ph.cfg.Topics.Partitions, 4))
	for k := range n {
		id := fmt.Sprintf("%s-w%d", ph.id, k)
		v, err := ph.intent(id, -1, false)
		if err != nil {
			return err
		}
		if err := pub.Send(ctx, ph.cfg.Topics.Requests, []byte(id), v, nil, time.Time{}); err != nil {
			return fmt.Errorf("publishing warm-up intents to %s: %w", ph.kafka.Bootstrap, err)
		}
	}
	t := ph.clock.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for ph.probesSeen.Load() < n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("the %s did not answer %d warm-up intents within %s (%d answered)", ph.kind, n, limit, ph.probesSeen.Load())
		case <-t.Chan():
		}
	}
	return nil
}

// release is the schedule's hand-over: intent seq goes to the publisher in a
// goroutine of its own, so a slow acknowledgement never delays the next
// intent. When 65,536 are in flight the schedule waits (and falls behind,
// which the generator-lag figure shows).
func (ph *phase) release(ctx context.Context, pub *kafkaio.Producer) func(seq int64, due time.Time) {
	return func(seq int64, due time.Time) {
		r := ph.rows.make(seq)
		if r == nil {
			return
		}
		r.due.Store(ph.us(due))
		select {
		case ph.inflight <- struct{}{}:
		case <-ctx.Done():
			return
		}
		ph.released.Add(1)
		if ph.kind == phaseBaseline && ignored(seq, ph.o.IgnoreRate) {
			ph.ignoredRel.Add(1)
		}
		ph.pubWG.Add(1)
		go func() {
			defer ph.pubWG.Done()
			defer func() { <-ph.inflight }()
			ph.publish(ctx, pub, seq, r)
		}()
	}
}

func (ph *phase) publish(ctx context.Context, pub *kafkaio.Producer, seq int64, r *row) {
	id := ph.id + "-" + strconv.FormatInt(seq, 10)
	v, err := ph.intent(id, seq, ignored(seq, ph.o.IgnoreRate))
	if err == nil {
		now := ph.clock.Now()
		r.req.Store(ph.msTs(now.UnixMilli()))
		r.sent.Store(ph.us(now))
		err = pub.Send(ctx, ph.cfg.Topics.Requests, []byte(id), v, nil, now)
	}
	if err != nil {
		r.sent.Store(-1)
		if ctx.Err() == nil && ph.sendErrs.Add(1) == 1 {
			ph.firstErr.Store(err.Error())
		}
		return
	}
	ph.sent.Add(1)
}

// onResult reads one record of the results topic: a Switchboard result, or
// in the baseline the agent's response forwarded as it is.
func (ph *phase) onResult(rec *port.Record) error {
	now := ph.clock.Now()
	seq, probe, ok := ph.seqOf(rec.Key)
	if !ok {
		return nil
	}
	if probe {
		ph.probesSeen.Add(1)
		return nil
	}
	r := ph.rows.at(seq)
	if r == nil {
		return nil
	}
	if r.results.Add(1) > 1 {
		ph.dups.Add(1)
		return nil
	}
	r.outcome.Store(ph.outcomeOf(rec.Value))
	r.res.Store(ph.msTs(rec.TimestampMs))
	r.resSeen.Store(ph.us(now))
	ph.results.Add(1)
	// What a caller observes: from the send to when a read_committed
	// reader had the result. Record timestamps hide the commit wait
	// (exactly_once) and the readers' fetch delay.
	e2e := (int64(r.resSeen.Load()) - int64(r.sent.Load())) / 1000 // ms
	ph.mu.Lock()
	ph.live.record(e2e)
	ph.step.record(e2e)
	ph.mu.Unlock()
	return nil
}

var outcomeIndex = func() map[schemas.Outcome]int32 {
	m := map[schemas.Outcome]int32{}
	for i, o := range intents.Outcomes {
		m[o] = int32(i + 1)
	}
	return m
}()

func (ph *phase) outcomeOf(value []byte) int32 {
	if ph.kind == phaseBaseline {
		var resp schemas.AgentResponse
		if ph.codec.Decode(value, &resp) != nil {
			return outcomeIndex[schemas.OutcomeUnknown]
		}
		if resp.Status == schemas.StatusOK {
			return outcomeIndex[schemas.OutcomeAnswered]
		}
		return outcomeIndex[schemas.OutcomeAgentError]
	}
	var res schemas.IntentResult
	if ph.codec.Decode(value, &res) != nil {
		return outcomeIndex[schemas.OutcomeUnknown]
	}
	if i, ok := outcomeIndex[res.Outcome]; ok {
		return i
	}
	return outcomeIndex[schemas.OutcomeUnknown]
}

// sample records the router's pending gauge, the intents in flight and the
// process's RSS every 100ms, keeping the peaks.
func (ph *phase) sample(ctx context.Context) error {
	t := ph.clock.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.Chan():
		}
		if ph.reg != nil {
			g := gaugeValues(ph.reg)
			storeMax(&ph.peakPending, int64(g["switchboard_intents_pending"]))
			ph.samples.Add(1)
			if g["switchboard_fetch_paused"] > 0 {
				ph.pausedSamples.Add(1)
			}
		}
		storeMax(&ph.peakInFlight, ph.inFlight())
		storeMax(&ph.peakRSS, rssBytes())
	}
}

// inFlight is how many intents released have no result yet (in the
// baseline, not counting those the agent ignores: they get none).
func (ph *phase) inFlight() int64 {
	return ph.released.Load() - ph.ignoredRel.Load() - ph.results.Load()
}
