package lag_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-mcp/switchboard/router/lag"
)

// fakeEnds is a cluster's partition ends, changed by the test between
// samples.
type fakeEnds struct {
	mu   sync.Mutex
	ends map[string]map[int32]lag.Ends
	fail error
	// failOn fails a request that names it.
	failOn string
}

func (f *fakeEnds) Ends(_ context.Context, topics []string) (map[string]map[int32]lag.Ends, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	if f.failOn != "" && slices.Contains(topics, f.failOn) {
		return nil, errors.New("TOPIC_AUTHORIZATION_FAILED")
	}
	out := map[string]map[int32]lag.Ends{}
	for _, t := range topics {
		if ps, ok := f.ends[t]; ok {
			out[t] = map[int32]lag.Ends{}
			for p, e := range ps {
				out[t][p] = e
			}
		}
	}
	return out, nil
}

func (f *fakeEnds) set(topic string, p int32, stable, high int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ends[topic] == nil {
		f.ends[topic] = map[int32]lag.Ends{}
	}
	f.ends[topic][p] = lag.Ends{Stable: stable, High: high}
}

// syncBuffer is a log destination the watch's goroutine writes and the
// test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type hangHarness struct {
	t     *testing.T
	ctx   context.Context
	clock *clockwork.FakeClock
	admin *fakeEnds
	w     *lag.HangWatch
	reg   *prometheus.Registry
	logs  *syncBuffer
}

const hangInterval = 10 * time.Second

func newHangHarness(t *testing.T, opts ...lag.HangOption) *hangHarness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	h := &hangHarness{
		t: t, ctx: ctx, clock: clockwork.NewFakeClock(), reg: prometheus.NewRegistry(), logs: &syncBuffer{},
		admin: &fakeEnds{ends: map[string]map[int32]lag.Ends{}},
	}
	var err error
	h.w, err = lag.NewHangWatch(h.admin, []string{"sb.result", "sb.pending", "sb.result"}, append([]lag.HangOption{
		lag.WithHangClock(h.clock), lag.WithHangInterval(hangInterval), lag.WithHangAfter(40 * time.Second),
		lag.WithHangBootstrap("127.0.0.1:9092"), lag.WithHangRegisterer(h.reg),
		lag.WithHangLogger(slog.New(slog.NewTextHandler(h.logs, nil))),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	h.settle()
	return h
}

// settle waits until the watch has finished a sample and waits on its
// timer.
func (h *hangHarness) settle() {
	h.t.Helper()
	if err := h.clock.BlockUntilContext(h.ctx, 1); err != nil {
		h.t.Fatalf("the watch did not finish its sample: %v", err)
	}
}

// next moves the clock one interval on and waits for that sample.
func (h *hangHarness) next() {
	h.t.Helper()
	h.clock.Advance(hangInterval)
	h.settle()
}

func TestHangWatchReportsAStuckLastStableOffsetOnce(t *testing.T) {
	h := newHangHarness(t)
	h.admin.set("sb.result", 0, 100, 100) // nothing open
	h.admin.set("sb.result", 3, 42, 57)   // a transaction open from offset 42
	h.next()                              // first seen behind at t=10s
	for range 3 {                         // t=20s..40s: 30 s behind, under the limit
		h.next()
		if err := h.w.Err(); err != nil {
			t.Fatalf("Err: %v, want nil (behind for less than the limit)", err)
		}
	}
	h.admin.set("sb.result", 3, 42, 80) // more written after it; the stable offset stays
	h.next()                            // t=50s: 40 s behind
	err := h.w.Err()
	if !errors.Is(err, lag.ErrHangingTransaction) || !strings.Contains(err.Error(), "sb.result[3] held at offset 42 (high watermark 80)") {
		t.Fatalf("Err = %v, want ErrHangingTransaction naming sb.result[3] at 42", err)
	}
	hs := h.w.Hanging()
	if len(hs) != 1 || hs[0].Topic != "sb.result" || hs[0].Partition != 3 || hs[0].Stable != 42 {
		t.Fatalf("Hanging = %+v, want sb.result[3] at 42", hs)
	}
	want := "deploy/kafka/kafka.sh tool org.apache.kafka.tools.TransactionsCommand --bootstrap-server 127.0.0.1:9092 abort --topic sb.result --partition 3 --start-offset 42"
	if got := strings.Count(h.logs.String(), want); got != 1 {
		t.Fatalf("the abort command is logged %d times, want once; logs:\n%s", got, h.logs.String())
	}
	h.next()
	h.next()
	if got := strings.Count(h.logs.String(), "hanging transaction on sb.result[3]"); got != 1 {
		t.Fatalf("the hanging partition is logged %d times over three samples, want once; logs:\n%s", got, h.logs.String())
	}
	if got := gaugeOf(t, h.reg, "switchboard_hanging_transactions_total"); got != 1 {
		t.Fatalf("switchboard_hanging_transactions_total = %v, want 1", got)
	}
	if got := gaugeOf(t, h.reg, "switchboard_hanging_transaction_partitions"); got != 1 {
		t.Fatalf("switchboard_hanging_transaction_partitions = %v, want 1", got)
	}

	h.admin.set("sb.result", 3, 80, 80) // aborted by hand
	h.next()
	if err := h.w.Err(); err != nil {
		t.Fatalf("Err after the abort: %v, want nil", err)
	}
	if got := gaugeOf(t, h.reg, "switchboard_hanging_transaction_partitions"); got != 0 {
		t.Fatalf("switchboard_hanging_transaction_partitions after the abort = %v, want 0", got)
	}
	if !strings.Contains(h.logs.String(), "the hanging transaction on sb.result[3] has ended") {
		t.Fatalf("no line says the transaction ended; logs:\n%s", h.logs.String())
	}
}

func TestHangWatchIgnoresTransactionsThatEnd(t *testing.T) {
	h := newHangHarness(t)
	// Always a transaction open, but a new one each sample: the stable
	// offset moves, as it does under a steady load of short transactions.
	for i := range int64(20) {
		h.admin.set("sb.pending", 1, 10*i, 10*i+5)
		h.next()
		if err := h.w.Err(); err != nil {
			t.Fatalf("Err at sample %d: %v, want nil (the stable offset moves)", i, err)
		}
	}
	if got := gaugeOf(t, h.reg, "switchboard_hanging_transactions_total"); got != 0 {
		t.Fatalf("switchboard_hanging_transactions_total = %v, want 0", got)
	}
}

func TestHangWatchKeepsItsCountThroughAFailedSample(t *testing.T) {
	h := newHangHarness(t)
	h.admin.set("sb.result", 0, 7, 9)
	h.next() // first seen at t=10s
	h.admin.mu.Lock()
	h.admin.fail = errors.New("broker down")
	h.admin.mu.Unlock()
	for range 4 { // t=20s..50s: no answers
		h.next()
	}
	if got := strings.Count(h.logs.String(), "could not read the partitions' ends"); got != 1 {
		t.Fatalf("four failed samples in a row are logged %d times, want once; logs:\n%s", got, h.logs.String())
	}
	h.admin.mu.Lock()
	h.admin.fail = nil
	h.admin.mu.Unlock()
	h.next() // t=60s: still at 7, first seen 50 s ago
	if !strings.Contains(h.logs.String(), "reads the partitions' ends again") {
		t.Fatalf("no line says the watch reads again; logs:\n%s", h.logs.String())
	}
	if err := h.w.Err(); !errors.Is(err, lag.ErrHangingTransaction) {
		t.Fatalf("Err = %v, want ErrHangingTransaction: the failed samples must not reset the time it has been stuck", err)
	}
}

// gatherer exposes one metric family of a registry (a counter or a gauge)
// as a collector, for testutil.ToFloat64.
type gatherer struct {
	reg  *prometheus.Registry
	name string
}

func (g gatherer) Describe(chan<- *prometheus.Desc) {}

func (g gatherer) Collect(ch chan<- prometheus.Metric) {
	mfs, err := g.reg.Gather()
	if err != nil {
		return
	}
	for _, mf := range mfs {
		if mf.GetName() != g.name {
			continue
		}
		for _, m := range mf.GetMetric() {
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(g.name, "", nil, nil), prometheus.UntypedValue, v)
		}
	}
}

// gaugeOf reads a counter's or a gauge's value.
func gaugeOf(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	return testutil.ToFloat64(gatherer{reg: reg, name: name})
}
