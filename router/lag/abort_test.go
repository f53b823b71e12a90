package lag_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/router/lag"
)

// fakeAborter is a cluster's producer states and transaction coordinators,
// and the abort markers written to it.
type fakeAborter struct {
	mu        sync.Mutex
	producers map[string][]lag.Producer // by "topic[partition]"
	live      map[string]bool           // "topic[partition] producer"
	decided   map[string]string         // "topic[partition] producer": "commit", "unknown" (default: abort)
	refuse    error
	tries     int
	aborts    []string // "topic[partition] producer epoch/coordinator epoch"
}

func (f *fakeAborter) Producers(_ context.Context, topic string, p int32) ([]lag.Producer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]lag.Producer(nil), f.producers[fmt.Sprintf("%s[%d]", topic, p)]...), nil
}

func (f *fakeAborter) Live(_ context.Context, topic string, p int32, pr lag.Producer) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.live[fmt.Sprintf("%s[%d] %d", topic, p, pr.ID)], nil
}

func (f *fakeAborter) Decision(_ context.Context, topic string, p int32, pr lag.Producer) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch f.decided[fmt.Sprintf("%s[%d] %d", topic, p, pr.ID)] {
	case "commit":
		return true, nil
	case "unknown":
		return false, fmt.Errorf("no record of producer %d since 12:00: %w", pr.ID, lag.ErrNoDecision)
	}
	return false, nil
}

func (f *fakeAborter) End(_ context.Context, topic string, p int32, pr lag.Producer, commit bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tries++
	if f.refuse != nil {
		return f.refuse
	}
	marker := fmt.Sprintf("%s[%d] %d %d/%d", topic, p, pr.ID, pr.Epoch, pr.CoordinatorEpoch)
	if commit {
		marker += " commit"
	}
	f.aborts = append(f.aborts, marker)
	key := fmt.Sprintf("%s[%d]", topic, p)
	ps := append([]lag.Producer(nil), f.producers[key]...)
	for i := range ps {
		if ps[i].ID == pr.ID {
			ps[i].TxnStart = -1 // the marker closed its transaction here
		}
	}
	f.producers[key] = ps
	return nil
}

func (f *fakeAborter) set(key string, ps ...lag.Producer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.producers[key] = ps
}

func (f *fakeAborter) aborted() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.aborts...)
}

func newAbortHarness(t *testing.T, opts ...lag.HangOption) (*hangHarness, *fakeAborter) {
	t.Helper()
	a := &fakeAborter{producers: map[string][]lag.Producer{}, live: map[string]bool{}, decided: map[string]string{}}
	return newHangHarness(t, append(opts, lag.WithHangAborter(a))...), a
}

// TestHangWatchAbortsOnlyAForgottenTransaction: of the producers on a
// hanging partition, the watch aborts the one whose transaction starts at
// the stuck last stable offset, and only once it is both silent for the
// limit and unknown to the coordinators as in progress; with it, every
// producer whose transaction opens further on and passes the same tests
// (the stable offset would stop at it next), and no other.
func TestHangWatchAbortsOnlyAForgottenTransaction(t *testing.T) {
	h, a := newAbortHarness(t)
	t0 := h.clock.Now()
	h.admin.set("sb.result", 3, 42, 57)
	h.admin.set("sb.pending", 1, 10, 12)
	a.set("sb.result[3]",
		lag.Producer{ID: 5, Epoch: 1, TxnStart: -1, LastWrite: t0.Add(-time.Hour)},        // no transaction open
		lag.Producer{ID: 31, Epoch: 2, TxnStart: 42, LastWrite: t0, CoordinatorEpoch: 0},  // the stuck one
		lag.Producer{ID: 40, Epoch: 7, TxnStart: 50, LastWrite: t0.Add(-time.Hour)},       // open later, forgotten too
		lag.Producer{ID: 41, Epoch: 1, TxnStart: 53, LastWrite: t0.Add(30 * time.Second)}, // open later, wrote 20 s before the abort
		lag.Producer{ID: 42, Epoch: 1, TxnStart: 55, LastWrite: t0.Add(-time.Hour)},       // open later, its coordinator has it Ongoing
	)
	a.live["sb.result[3] 42"] = true
	// sb.pending[1]'s producer has it in a transaction its coordinator
	// lists Ongoing; producer 31 is live too, but on another partition.
	a.set("sb.pending[1]", lag.Producer{ID: 77, Epoch: 3, TxnStart: 10, LastWrite: t0.Add(-time.Hour)})
	a.live["sb.pending[1] 77"] = true
	a.live["sb.pending[1] 31"] = true

	h.next() // t=10s: first seen stuck
	if got := a.aborted(); len(got) != 0 {
		t.Fatalf("aborts %v at the first sight of the stuck offset, want none", got)
	}
	h.next() // t=20s: stuck since the last sample; 31 and 40 silent for the transaction timeout
	if got := a.aborted(); len(got) != 2 || got[0] != "sb.result[3] 31 2/0" || got[1] != "sb.result[3] 40 7/0" {
		t.Fatalf("aborts %v, want producer 31 on sb.result[3] (epoch 2, coordinator epoch 0), then 40 (epoch 7), only", got)
	}
	if strings.Contains(h.logs.String(), "not aborting") {
		t.Fatalf("a line about sb.pending[1] before it is reported hanging; logs:\n%s", h.logs.String())
	}
	for range 3 { // t=50s: sb.pending[1] reported hanging
		h.next()
	}
	if got := gaugeOf(t, h.reg, "switchboard_hanging_transactions_aborted_total"); got != 2 {
		t.Fatalf("switchboard_hanging_transactions_aborted_total = %v, want 2", got)
	}
	logs := h.logs.String()
	for _, line := range []string{
		"aborted the hanging transaction on sb.result[3]: producer 31 (epoch 2) had left it open at offset 42",
		"aborted the hanging transaction on sb.result[3]: producer 40 (epoch 7) had left it open at offset 50",
	} {
		if !strings.Contains(logs, line) {
			t.Fatalf("no line %q; logs:\n%s", line, logs)
		}
	}
	if !strings.Contains(logs, "not ending the hanging transaction on sb.pending[1] (offset 10): a transaction coordinator has producer 77's transaction on it in progress") {
		t.Fatalf("no line says why sb.pending[1] was left alone; logs:\n%s", logs)
	}
	h.admin.set("sb.result", 3, 57, 57) // the markers: the stable offset reaches the high watermark
	h.next()
	h.next()
	if got := a.aborted(); len(got) != 2 {
		t.Fatalf("aborts %v, want still two: the live producers are never aborted", got)
	}
	if got := strings.Count(h.logs.String(), "not ending the hanging transaction on sb.pending[1]"); got != 1 {
		t.Fatalf("the live producer is logged %d times, want once", got)
	}
}

// TestHangWatchWaitsForARecentWriter: a producer that wrote less than the
// transaction timeout ago may be alive; the watch aborts it only once it
// has been silent for that long (WithHangAbortAfter).
func TestHangWatchWaitsForARecentWriter(t *testing.T) {
	h, a := newAbortHarness(t, lag.WithHangAbortAfter(25*time.Second))
	t0 := h.clock.Now()
	h.admin.set("sb.result", 0, 100, 120)
	a.set("sb.result[0]", lag.Producer{ID: 9, Epoch: 4, TxnStart: 100, LastWrite: t0.Add(40 * time.Second)})
	for range 5 { // t=50s: hanging, but producer 9 wrote 10 s ago
		h.next()
	}
	if got := a.aborted(); len(got) != 0 {
		t.Fatalf("aborts %v at t=50s, want none: producer 9 wrote 10 s ago", got)
	}
	if !strings.Contains(h.logs.String(), "not ending the hanging transaction on sb.result[0] (offset 100): producer 9 wrote 10s ago, less than 25s") {
		t.Fatalf("no line says why producer 9 was left alone; logs:\n%s", h.logs.String())
	}
	h.next() // t=60s: 20 s
	if got := a.aborted(); len(got) != 0 {
		t.Fatalf("aborts %v at t=60s, want none", got)
	}
	h.next() // t=70s: 30 s
	if got := a.aborted(); len(got) != 1 || got[0] != "sb.result[0] 9 4/0" {
		t.Fatalf("aborts %v at t=70s, want producer 9", got)
	}
}

// TestHangWatchAbortsALongSilentProducerAtOnce: a watch started after the
// producer went silent (a router that took over after a broker restart)
// aborts a forgotten transaction as soon as it has seen the offset stuck
// at two samples: the producer's silence is the broker's fact, and waiting
// for the report's limit in every new process held takeovers for minutes.
// The report still waits for its limit.
func TestHangWatchAbortsALongSilentProducerAtOnce(t *testing.T) {
	h, a := newAbortHarness(t)
	t0 := h.clock.Now()
	h.admin.set("sb.pending", 4, 7, 9)
	a.set("sb.pending[4]", lag.Producer{ID: 23, Epoch: 2, TxnStart: 7, LastWrite: t0.Add(-30 * time.Second)})
	h.next() // t=10s: first seen
	if got := a.aborted(); len(got) != 0 {
		t.Fatalf("aborts %v at the first sight, want none: a stable offset behind the high watermark is a transaction in flight", got)
	}
	h.next() // t=20s: the same offset again
	if got := a.aborted(); len(got) != 1 || got[0] != "sb.pending[4] 23 2/0" {
		t.Fatalf("aborts %v at the second sight, want producer 23", got)
	}
	if hs := h.w.Hanging(); len(hs) != 0 {
		t.Fatalf("Hanging = %+v at 10 s stuck, want none before the limit", hs)
	}
	if got := gaugeOf(t, h.reg, "switchboard_hanging_transactions_total"); got != 0 {
		t.Fatalf("switchboard_hanging_transactions_total = %v, want 0 before the limit", got)
	}
}

// TestHangWatchStopsTryingWhenRefused: without ClusterAction the abort is
// refused; the watch says what the operator can do once, and does not ask
// again for that transaction.
func TestHangWatchStopsTryingWhenRefused(t *testing.T) {
	h, a := newAbortHarness(t)
	t0 := h.clock.Now()
	a.refuse = fmt.Errorf("writing the abort marker: CLUSTER_AUTHORIZATION_FAILED: %w", lag.ErrAbortRefused)
	h.admin.set("sb.result", 2, 5, 6)
	a.set("sb.result[2]", lag.Producer{ID: 12, Epoch: 0, TxnStart: 5, LastWrite: t0.Add(-time.Hour)})
	for range 8 {
		h.next()
	}
	logs := h.logs.String()
	if got := strings.Count(logs, "could not end the hanging transaction on sb.result[2]"); got != 1 {
		t.Fatalf("the refusal is logged %d times, want once; logs:\n%s", got, logs)
	}
	if !strings.Contains(logs, "ClusterAction") || !strings.Contains(logs, "abort --topic sb.result --partition 2 --start-offset 5") {
		t.Fatalf("the refusal does not name the ACL and the operator's command; logs:\n%s", logs)
	}
	if got := gaugeOf(t, h.reg, "switchboard_hanging_transactions_aborted_total"); got != 0 {
		t.Fatalf("switchboard_hanging_transactions_aborted_total = %v, want 0", got)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tries != 1 {
		t.Fatalf("the abort was tried %d times over four hanging samples, want once", a.tries)
	}
}

// TestHangWatchEndsATransactionAsItsCoordinatorDid: a forgotten
// transaction whose coordinator committed it (its marker skipped on a
// partition without a leader, KAFKA-20734) gets a commit marker, not an
// abort that would drop records a router was told were committed; one
// whose decision the transaction log does not hold is left alone, said
// once with the reason.
func TestHangWatchEndsATransactionAsItsCoordinatorDid(t *testing.T) {
	h, a := newAbortHarness(t)
	t0 := h.clock.Now()
	h.admin.set("sb.result", 4, 2561, 2600)
	h.admin.set("sb.pending", 5, 4551, 4560)
	a.set("sb.result[4]", lag.Producer{ID: 1106, Epoch: 1, TxnStart: 2561, LastWrite: t0.Add(-time.Minute)})
	a.set("sb.pending[5]", lag.Producer{ID: 1107, Epoch: 0, TxnStart: 4551, LastWrite: t0.Add(-time.Minute)})
	a.decided["sb.result[4] 1106"] = "commit"
	a.decided["sb.pending[5] 1107"] = "unknown"
	for range 5 { // t=50s: both reported hanging
		h.next()
	}
	if got := a.aborted(); len(got) != 1 || got[0] != "sb.result[4] 1106 1/0 commit" {
		t.Fatalf("markers %v, want a commit marker for producer 1106 on sb.result[4] only", got)
	}
	if got := gaugeOf(t, h.reg, "switchboard_hanging_transactions_committed_total"); got != 1 {
		t.Fatalf("switchboard_hanging_transactions_committed_total = %v, want 1", got)
	}
	if got := gaugeOf(t, h.reg, "switchboard_hanging_transactions_aborted_total"); got != 0 {
		t.Fatalf("switchboard_hanging_transactions_aborted_total = %v, want 0", got)
	}
	logs := h.logs.String()
	if !strings.Contains(logs, "committed the hanging transaction on sb.result[4]: producer 1106 (epoch 1) had left it open at offset 2561") {
		t.Fatalf("no line says the transaction was committed; logs:\n%s", logs)
	}
	if got := strings.Count(logs, "not ending the hanging transaction on sb.pending[5] (offset 4551): how producer 1107's coordinator ended its transaction cannot be read"); got != 1 {
		t.Fatalf("the unreadable decision is said %d times, want once; logs:\n%s", got, logs)
	}
}

func TestOffsetsPartitionIsTheBrokers(t *testing.T) {
	// Kafka's Utils.abs(s.hashCode()) % 50 (Math.abs), from jshell; the
	// last two hash negative.
	for group, want := range map[string]int32{"switchboard-router": 8, "chaos.é-router-🎉": 39, "hangabort.x1.group": 32, "hangabort.a43b0236.group": 0} {
		if got := lag.OffsetsPartition(group, 50); got != want {
			t.Errorf("OffsetsPartition(%q, 50) = %d, want %d", group, got, want)
		}
	}
}

// TestHangWatchWatchesTheGroupsOffsets: with WithHangGroupOffsets the
// watch also finds (and aborts) a forgotten transaction on the group's
// partition of __consumer_offsets, and only that partition; when that
// topic cannot be read, the others are still watched.
func TestHangWatchWatchesTheGroupsOffsets(t *testing.T) {
	a := &fakeAborter{producers: map[string][]lag.Producer{}, live: map[string]bool{}, decided: map[string]string{}}
	h := newHangHarness(t, lag.WithHangAborter(a), lag.WithHangGroupOffsets("switchboard-router"))
	t0 := h.clock.Now()
	for p := range int32(50) {
		h.admin.set(lag.OffsetsTopic, p, 10, 10)
	}
	h.admin.set(lag.OffsetsTopic, 8, 20, 21) // the group's, held by the forgotten producer
	h.admin.set(lag.OffsetsTopic, 3, 30, 31) // another group's
	a.set(lag.OffsetsTopic+"[8]", lag.Producer{ID: 31, Epoch: 2, TxnStart: 20, LastWrite: t0.Add(-time.Hour)})
	a.set(lag.OffsetsTopic+"[3]", lag.Producer{ID: 44, Epoch: 1, TxnStart: 30, LastWrite: t0.Add(-time.Hour)})
	for range 5 {
		h.next()
	}
	if got := a.aborted(); len(got) != 1 || got[0] != "__consumer_offsets[8] 31 2/0" {
		t.Fatalf("aborts %v, want producer 31 on __consumer_offsets[8] only", got)
	}
	if hs := h.w.Hanging(); len(hs) != 1 || hs[0].Topic != lag.OffsetsTopic || hs[0].Partition != 8 {
		t.Fatalf("Hanging = %+v, want __consumer_offsets[8] only", hs)
	}

	h.admin.mu.Lock()
	h.admin.failOn = lag.OffsetsTopic
	h.admin.mu.Unlock()
	h.admin.set("sb.result", 1, 5, 6)
	for range 6 {
		h.next()
	}
	if got := strings.Count(h.logs.String(), "could not read __consumer_offsets's ends"); got != 1 {
		t.Fatalf("the unreadable offsets topic is logged %d times, want once; logs:\n%s", got, h.logs.String())
	}
	if hs := h.w.Hanging(); len(hs) != 1 || hs[0].Topic != "sb.result" {
		t.Fatalf("Hanging = %+v, want sb.result[1]: the other topics are still watched", hs)
	}
}
