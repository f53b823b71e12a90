package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/schemas"
)

func TestBenchHistogramPercentiles(t *testing.T) {
	var h histogram
	if h.quantile(0.99) != 0 || h.count() != 0 {
		t.Fatal("an empty histogram has no quantiles")
	}
	for v := int64(100); v >= 1; v-- { // order does not matter
		h.record(v)
	}
	// 1..100: the nearest rank of q is ceil(100 q).
	for _, c := range []struct {
		q    float64
		want int64
	}{{0.01, 1}, {0.5, 50}, {0.9, 90}, {0.99, 99}, {0.999, 100}, {1, 100}} {
		if got := h.quantile(c.q); got != c.want {
			t.Errorf("1..100: q%v = %d, want %d", c.q, got, c.want)
		}
	}
	if h.count() != 100 || h.mean() != 50.5 || h.min != 1 || h.max != 100 {
		t.Errorf("1..100: count %d, mean %v, min %d, max %d", h.count(), h.mean(), h.min, h.max)
	}

	// 1,000..100,000 in steps of 1,000: exact below 2,048, and above
	// while the low shift bits are zero; else the low end of a bucket of
	// 2^shift values, shift = bit length - 11.
	var ms histogram
	for v := int64(1000); v <= 100_000; v += 1000 {
		ms.record(v)
	}
	for _, c := range []struct {
		q    float64
		want int64
	}{
		{0.1, 10_000},  // 10,000 = 1250 << 3 (14 bits, shift 3): exact
		{0.16, 16_000}, // 16,000 = 2000 << 3 (14 bits, shift 3): exact
		{0.5, 49_984},  // 50,000: 16 bits, shift 5; 50,000>>5 = 1562; 1562<<5 = 49,984
		{0.99, 98_944}, // 99,000: 17 bits, shift 6; 99,000>>6 = 1546; 1546<<6 = 98,944
		{1, 99_968},    // 100,000: 17 bits, shift 6; 1562<<6 = 99,968
	} {
		got := ms.quantile(c.q)
		if got != c.want {
			t.Errorf("ms steps: q%v = %d, want %d", c.q, got, c.want)
		}
	}

	// Every value is reported within 0.1 % below itself.
	for _, v := range []int64{2047, 2048, 2049, 4095, 123_457, 9_999_999, histMax} {
		var one histogram
		one.record(1)
		one.record(v)
		got := one.quantile(1)
		if got > v || float64(v-got) > 0.001*float64(v) {
			t.Errorf("%d reported as %d", v, got)
		}
		if lo := histLow(histIndex(v)); histIndex(lo) != histIndex(v) || lo > v {
			t.Errorf("%d: bucket %d starts at %d", v, histIndex(v), lo)
		}
	}

	// Out of range values are clamped; merge adds counts.
	var a, b histogram
	a.record(-5)
	b.record(histMax + 1)
	a.merge(&b)
	if a.count() != 2 || a.min != 0 || a.max != histMax || a.quantile(0.5) != 0 {
		t.Errorf("clamp and merge: count %d, min %d, max %d, p50 %d", a.count(), a.min, a.max, a.quantile(0.5))
	}
}

func TestBenchPacerArithmetic(t *testing.T) {
	clock := clockwork.NewFakeClock()
	t0 := clock.Now()
	p := newPacer(t0, 1000)
	for _, c := range []struct {
		at   time.Duration
		want int64
	}{
		{0, 0},
		{time.Millisecond - 1, 0},
		{time.Millisecond, 1},
		{999 * time.Millisecond, 999},
		{time.Second, 1000},
		{10 * time.Second, 10_000},
		{-time.Second, 0},
	} {
		if got := p.due(t0.Add(c.at)); got != c.want {
			t.Errorf("1000/s: due after %v = %d, want %d", c.at, got, c.want)
		}
	}
	if got, want := p.at(0), t0.Add(time.Millisecond); !got.Equal(want) {
		t.Errorf("1000/s: intent 0 due at %v, want %v", got.Sub(t0), want.Sub(t0))
	}

	// 3/s does not divide a second: intent k is due at the first nanosecond
	// at or after (k+1)/3 s, and due() agrees with at() to the nanosecond.
	p = newPacer(t0, 3)
	for seq := int64(0); seq < 10; seq++ {
		at := p.at(seq)
		if p.due(at) != seq+1 || p.due(at.Add(-1)) != seq {
			t.Errorf("3/s: intent %d due at %v: due() there %d, a nanosecond before %d", seq, at.Sub(t0), p.due(at), p.due(at.Add(-1)))
		}
	}
	if got := p.at(2).Sub(t0); got != time.Second {
		t.Errorf("3/s: intent 2 due at %v, want 1s", got)
	}

	// Half an intent a second: the first at 2s.
	p = newPacer(t0, 0.5)
	if p.due(t0.Add(1999*time.Millisecond)) != 0 || p.due(t0.Add(2*time.Second)) != 1 {
		t.Error("0.5/s: the first intent is not due at 2s")
	}

	// A step up: what was due stays due, the new rate counts from the step.
	p = newPacer(t0, 1000)
	p.setRate(t0.Add(time.Second), 2000)
	if got := p.due(t0.Add(1500 * time.Millisecond)); got != 2000 {
		t.Errorf("after a step to 2000/s at 1s: due at 1.5s = %d, want 2000", got)
	}
	if got := p.at(1000).Sub(t0); got != time.Second+500*time.Microsecond {
		t.Errorf("after the step: intent 1000 due at %v, want 1.0005s", got)
	}
	if got := p.at(1999).Sub(t0); got != 1500*time.Millisecond {
		t.Errorf("after the step: intent 1999 due at %v, want 1.5s", got)
	}

	// A pause (a repeated step waits for the backlog): what fell due during
	// it is skipped, not sent in a burst when the load resumes.
	p = newPacer(t0, 1000)
	p.resume(t0.Add(3*time.Second), 1000) // 1,000 released in the first second, then a pause
	if got := p.due(t0.Add(3 * time.Second)); got != 1000 {
		t.Errorf("resumed at 3s after 1000 released: due = %d, want 1000 (no burst)", got)
	}
	if got := p.due(t0.Add(3500 * time.Millisecond)); got != 1500 {
		t.Errorf("resumed: due at 3.5s = %d, want 1500", got)
	}

	// No overflow: a million a second for half an hour.
	p = newPacer(t0, 1e6)
	if got := p.due(t0.Add(30 * time.Minute)); got != 1_800_000_000 {
		t.Errorf("1e6/s for 30m: %d", got)
	}
}

// TestBenchScheduleIsOpenLoop drives the schedule with a fake clock: it
// releases what is due at each tick, catches up in one batch after a late
// tick, and stops at its limit, whatever release does with the intents.
func TestBenchScheduleIsOpenLoop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	clock := clockwork.NewFakeClock()
	t0 := clock.Now()
	var dues []time.Time
	s := &schedule{
		clock: clock, tick: time.Millisecond, limit: 2500,
		release: func(seq int64, due time.Time) {
			if seq != int64(len(dues)) {
				t.Errorf("released %d after %d intents", seq, len(dues))
			}
			dues = append(dues, due)
		},
	}
	ticked := make(chan int64)
	done := make(chan int64, 1)
	go func() {
		done <- s.run(ctx, newPacer(t0, 1000), func(_ time.Time, released int64) bool {
			select {
			case ticked <- released:
			case <-ctx.Done():
				return true
			}
			return released >= s.limit
		})
	}()
	if err := clock.BlockUntilContext(ctx, 1); err != nil { // the ticker
		t.Fatal(err)
	}
	// The fake clock fires every tick it passes on the way (the ticker's
	// channel holds one), so a step reads ticks until the last one, at the
	// new time, and none may have released more than is due by then.
	step := func(d time.Duration, want int64) {
		t.Helper()
		clock.Advance(d)
		for {
			select {
			case got := <-ticked:
				if got > want {
					t.Fatalf("after %v: %d released, more than the %d due", clock.Since(t0), got, want)
				}
				if got == want {
					return
				}
			case <-ctx.Done():
				t.Fatalf("after %v: never %d released", clock.Since(t0), want)
			}
		}
	}
	step(time.Millisecond, 1)
	step(time.Millisecond, 2)
	step(998*time.Millisecond, 1000) // a late tick: the whole second at once
	step(time.Millisecond, 1001)
	step(5*time.Second, 2500) // the limit, not 6001
	if n := <-done; n != 2500 || len(dues) != 2500 {
		t.Fatalf("run returned %d with %d released, want 2500", n, len(dues))
	}
	for _, seq := range []int{0, 1, 999, 2499} {
		if got, want := dues[seq].Sub(t0), time.Duration(seq+1)*time.Millisecond; got != want {
			t.Errorf("intent %d due at %v, want %v", seq, got, want)
		}
	}
}

// TestBenchEmbeddedJSON is a tiny real run: 200 intents/s for 2s through the
// router on the embedded broker.
func TestBenchEmbeddedJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the router for a few seconds")
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	rep, errOut := runEmbedded(t, embeddedOptions())
	r := rep.Router
	if r == nil || rep.Baseline != nil || rep.Mode != "fixed" || rep.Delivery != "exactly_once" || !rep.Embedded {
		t.Fatalf("report: %+v", rep)
	}
	if r.Sent != 400 || r.SendErrors != 0 {
		t.Errorf("sent %d (%d errors), want 400 = 200/s × 2s", r.Sent, r.SendErrors)
	}
	if r.Results != r.Sent || r.Missing != 0 || r.Duplicates != 0 || r.Outcomes["answered"] != r.Sent {
		t.Errorf("results %d, missing %d, duplicates %d, outcomes %v: want one answer per intent sent", r.Results, r.Missing, r.Duplicates, r.Outcomes)
	}
	l := r.Latency
	for name, s := range map[string]latencyStats{
		"end_to_end": l.EndToEnd, "end_to_end_observed": l.EndToEndObserved, "request_to_dispatch": l.RequestToDispatch,
		"response_to_result": l.ResponseToResult, "publish_to_agent": l.PublishToAgent, "agent_to_result": l.AgentToResult,
		"dispatch_to_agent": l.DispatchToAgent, "result_to_caller": l.ResultToCaller,
	} {
		if s.N != uint64(r.Sent) || s.P50 < 0 || s.P50 > s.P90 || s.P90 > s.P99 || s.P99 > s.P999 || s.P999 > s.Max || s.Max > 60_000 {
			t.Errorf("%s: %+v", name, s)
		}
	}
	if l.EndToEndObserved.P50 <= 0 || l.EndToEndObserved.Max < l.PublishToAgent.P50 {
		t.Errorf("observed latencies: %+v, publish to agent %+v", l.EndToEndObserved, l.PublishToAgent)
	}
	if r.OfferedPerS < 180 || r.OfferedPerS > 220 || r.AchievedPerS <= 0 || r.AchievedPerS > 250 || r.LoadS < 1.9 || r.LoadS > 10 {
		t.Errorf("offered %v/s, achieved %v/s over %vs", r.OfferedPerS, r.AchievedPerS, r.LoadS)
	}
	if r.PeakPending == nil || *r.PeakPending < 0 || r.ProcessCPUCores <= 0 || r.RSSPeakMiB <= 0 || rep.Machine.CPUs <= 0 {
		t.Errorf("peak pending %v, CPU %v, RSS %v, machine %+v", r.PeakPending, r.ProcessCPUCores, r.RSSPeakMiB, rep.Machine)
	}
	if r.RouterMetrics[`switchboard_intents_dispatched_total{agent="bench"}`] < float64(r.Sent) {
		t.Errorf("router metrics: %v", r.RouterMetrics)
	}
	// The per-second series covers every intent sent, second by second
	// from the load's start.
	var perSecond int64
	for i, s := range r.PerSecond {
		perSecond += s.Sent
		if s.S < i || s.S > 3 || s.Sent <= 0 || int64(s.Results) != s.Sent || s.E2EP50 > s.E2EP99 || s.E2EP99 > l.EndToEndObserved.Max+1 || s.GenLagMax < 0 {
			t.Errorf("per_second[%d]: %+v", i, s)
		}
	}
	// The settled figure leaves out the first 2 s: of 2 s at 200/s, at
	// most the last intent or so.
	if st := l.EndToEndObservedSettled; st != nil && (st.N > 2 || st.P99 > l.EndToEndObserved.Max) {
		t.Errorf("settled end to end: %+v, want at most the intents sent 2 s after the start", st)
	}
	if perSecond != r.Sent || len(r.PerSecond) < 2 || r.LoadStart == "" {
		t.Errorf("per-second series: %d intents in %d seconds, load start %q; want all %d", perSecond, len(r.PerSecond), r.LoadStart, r.Sent)
	}
	if !strings.Contains(errOut, "bench router:   1s  200/s") {
		t.Errorf("no progress line on stderr:\n%s", errOut)
	}
}

// The exactly_once baseline carries its results in Kafka transactions, as
// the router does (forwardTx): every intent gets its one result, and the
// baseline's clients speak the transaction protocol.
func TestBenchExactlyOnceBaselineIsTransactional(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the router and the baseline for a few seconds each")
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	o := embeddedOptions()
	o.Baseline = true
	rep, _ := runEmbedded(t, o)
	b := rep.Baseline
	if b == nil || rep.Delivery != "exactly_once" {
		t.Fatalf("report: %+v", rep)
	}
	if b.Results != b.Sent || b.Sent != 400 || b.Missing != 0 || b.Duplicates != 0 {
		t.Errorf("baseline: sent %d, results %d, missing %d, duplicates %d: want one result per intent", b.Sent, b.Results, b.Missing, b.Duplicates)
	}
	if c := b.BrokerPerIntent; c == nil || c.Txn < 1 {
		t.Errorf("baseline broker requests per intent %+v: want the transaction protocol's (txn ≥ 1)", c)
	}
}

// embeddedOptions: 2 s at 200/s on the embedded broker, JSON report.
func embeddedOptions() *Options {
	return &Options{
		Embedded: true, Rate: 200, Duration: 2 * time.Second, JSON: true, Timeout: 2 * time.Second, PayloadBytes: 100,
		StartRate: 1000, Step: 1000, StepDuration: 5 * time.Second, MaxRate: 50000, StepRepeat: true, MaxP99: 500 * time.Millisecond,
	}
}

// runEmbedded runs the bench with o and returns its JSON report and stderr.
func runEmbedded(t *testing.T, o *Options) (benchReport, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	if err := o.Check(""); err != nil {
		t.Fatal(err)
	}
	base, err := config.Parse("defaults", []byte("agents: {a: {}}\nintents: {a: {agent: a}}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	w := Wiring{
		Base: base, Log: slog.New(slog.DiscardHandler),
		Settings: func(cfg *config.Config, clientID string) kafkaio.Settings {
			return kafkaio.Settings{Bootstrap: cfg.Kafka.BootstrapServers, Properties: cfg.Kafka.Properties, ClientID: clientID}
		},
		Codec: func(*config.Config) (*schemas.Codec, error) { return schemas.NewCodec() },
	}
	if err := Run(ctx, o, w, &out, &errOut); err != nil {
		t.Fatalf("%v:\n%s", err, errOut.String())
	}
	var rep benchReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report (%v):\n%s", err, out.String())
	}
	return rep, errOut.String()
}

// A statistics event's latencies reach the per-second series: the highest
// p99 over the event's brokers, in the second it arrived; windows without
// samples count as nothing.
func TestBenchSeriesTakesClientLatencies(t *testing.T) {
	var b brokerStats
	b.add(`{"name":"p#producer-1","txmsgs":5,"brokers":{
		"127.0.0.1:9092/1":{"txbytes":10,"req":{"Produce":3},"rtt":{"p99":4200,"cnt":7},"int_latency":{"p99":15000,"cnt":7},"outbuf_latency":{"p99":900,"cnt":3}},
		"127.0.0.1:9092/bootstrap":{"txbytes":0,"req":{},"rtt":{"p99":99000,"cnt":0},"int_latency":{"p99":0,"cnt":0},"outbuf_latency":{"p99":0,"cnt":0}}}}`)
	b.add(`not json`)
	ls := b.latencies()
	if len(ls) != 1 || ls[0].RTT != 4.2 || ls[0].IntLat != 15 || ls[0].Outbuf != 0.9 {
		t.Fatalf("latency samples %+v, want one with rtt 4.2, int_latency 15, outbuf 0.9 ms (a window with cnt 0 ignored)", ls)
	}
	if tot := b.total(); tot.TxMsgs != 5 || tot.Req["Produce"] != 3 {
		t.Errorf("counters %+v", tot)
	}

	epoch := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	s := newSeries(2_000_000) // the load started 2 s after the epoch
	for _, c := range []struct{ sentUs, e2eMs int64 }{{2_000_000, 5}, {2_500_000, 50}, {3_100_000, 7}, {1_000_000, 1}} {
		if h := s.at(c.sentUs); h != nil {
			h.sent++
			h.h[sE2E].record(c.e2eMs)
		}
	}
	samples := []clientLatency{
		{At: epoch.Add(2500 * time.Millisecond), RTT: 3, IntLat: 8, Outbuf: 1},
		{At: epoch.Add(2900 * time.Millisecond), RTT: 30, IntLat: 2, Outbuf: 0},
		{At: epoch.Add(3200 * time.Millisecond), RTT: 4, IntLat: 1, Outbuf: 0.5},
	}
	got := s.report(samples, epoch.UnixMicro())
	if len(got) != 2 {
		t.Fatalf("series %+v: want seconds 0 and 1 (a send before the load is outside)", got)
	}
	if g := got[0]; g.S != 0 || g.Sent != 2 || g.E2EP50 != 5 || g.E2EP99 != 50 || g.RTTP99 != 30 || g.IntLatP99 != 8 || g.OutbufP99 != 1 {
		t.Errorf("second 0: %+v", g)
	}
	if g := got[1]; g.S != 1 || g.Sent != 1 || g.E2EP99 != 7 || g.RTTP99 != 4 || g.IntLatP99 != 1 || g.OutbufP99 != 0.5 {
		t.Errorf("second 1: %+v", g)
	}
}

// The router's µs histogram is summarised by interpolating within buckets:
// 100 observations, 50 in (0, 10µs], 49 in (10µs, 20µs], 1 in (20µs, 40µs].
func TestBenchPromHistogramStats(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "x_seconds", Buckets: []float64{10e-6, 20e-6, 40e-6},
	}, []string{"topic"})
	reg.MustRegister(h)
	for range 50 {
		h.WithLabelValues("requests").Observe(5e-6)
	}
	for range 49 {
		h.WithLabelValues("requests").Observe(15e-6)
	}
	h.WithLabelValues("requests").Observe(30e-6)
	h.WithLabelValues("responses").Observe(1)
	st := promStats(reg, "x_seconds", "topic", "requests")
	if st.N != 100 || st.P50 != 0.01 || st.P99 != 0.02 || st.Max != 0.04 {
		t.Fatalf("stats %+v: want n=100 p50=0.01 p99=0.02 max=0.04 (ms)", st)
	}
	if st.P90 <= 0.01 || st.P90 >= 0.02 {
		t.Fatalf("p90 %v not interpolated within (0.01, 0.02] ms", st.P90)
	}
	if st := promStats(reg, "x_seconds", "topic", "responses"); st.N != 1 || st.Max != 0.04 {
		t.Fatalf("an observation past the last bucket: %+v", st)
	}
	if st := promStats(reg, "x_seconds", "topic", "nothing"); st.N != 0 {
		t.Fatalf("no series: %+v", st)
	}
}

// The report names the linger the run's producers used: Switchboard's
// default (they send at once), or what kafka.properties sets.
func TestBenchReportsTheLingerUsed(t *testing.T) {
	for _, c := range []struct {
		props map[string]string
		want  string
	}{
		{nil, "0 (Switchboard's default)"},
		{map[string]string{"linger.ms": "5"}, "5"},
		{map[string]string{"queue.buffering.max.ms": "2"}, "2"},
	} {
		base := &config.Config{}
		base.Kafka.Properties = c.props
		if got := newBenchReport(&Options{Delivery: config.AtLeastOnce}, base).LingerMs; got != c.want {
			t.Errorf("kafka.properties %v: linger_ms %q, want %q", c.props, got, c.want)
		}
	}
}
