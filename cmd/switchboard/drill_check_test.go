package main

// The figures of the three-broker drill (drill_integration_test.go), from
// what the harness saw: when each intent was sent, when its result was
// first read, and its outcome. Plain data in, figures out, so that their own
// test below runs without Kafka.

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

// drillIntent is one intent of the drill's load.
type drillIntent struct {
	sentMs  int64  // when the harness handed it to the producer (unix ms)
	seenMs  int64  // when a read_committed reader first had its result; 0: never
	outcome string // of its (first) result
}

// drillFigures is what the drill reports besides the chaos verdict's counts.
type drillFigures struct {
	Sent               int
	AnsweredInDeadline float64 // share answered by the agent, result read within the deadline of the send
	AnsweredLate       float64 // share answered by the agent, result read later than that
	Fallback           float64 // share resolved with a fallback (or timed_out)
	Other              float64 // share with another outcome, or none
	Within120s         float64 // share whose result (any outcome) was read within 120 s of the send: the source documents' measure
	LongestGap         time.Duration
	GapAt              int64            // unix ms where the longest gap began
	P99                [3]time.Duration // before, during, after the disturbances
	Counted            [3]int
	// By the phase of the send (before, during, after), every intent sent
	// then counted: the share answered within the deadline, and the share
	// shed (outcome shed: late shedding or a full queue).
	InDeadlineBy, ShedBy [3]float64
}

// figures computes the drill's figures: phases are split at duringFrom and
// afterFrom (send times, unix ms); gaps are looked for between loadFrom and
// loadTo.
func figures(ins []drillIntent, deadline time.Duration, duringFrom, afterFrom, loadFrom, loadTo int64) drillFigures {
	f := drillFigures{Sent: len(ins)}
	if len(ins) == 0 {
		return f
	}
	var lat [3][]int64
	var seen []int64
	var inTime, late, fallback, within120 int
	var sentBy, inTimeBy, shedBy [3]int
	for _, in := range ins {
		if in.seenMs > 0 && in.seenMs-in.sentMs <= (120*time.Second).Milliseconds() {
			within120++
		}
		phase := 0
		switch {
		case in.sentMs >= afterFrom:
			phase = 2
		case in.sentMs >= duringFrom:
			phase = 1
		}
		sentBy[phase]++
		switch in.outcome {
		case "answered":
			if in.seenMs > 0 && in.seenMs-in.sentMs <= deadline.Milliseconds() {
				inTime++
				inTimeBy[phase]++
			} else {
				late++
			}
		case "fallback_static", "fallback_cache", "timed_out":
			fallback++
		case "shed":
			shedBy[phase]++
		}
		if in.seenMs == 0 {
			continue
		}
		seen = append(seen, in.seenMs)
		lat[phase] = append(lat[phase], in.seenMs-in.sentMs)
	}
	for i := range sentBy {
		if sentBy[i] > 0 {
			f.InDeadlineBy[i], f.ShedBy[i] = float64(inTimeBy[i])/float64(sentBy[i]), float64(shedBy[i])/float64(sentBy[i])
		}
	}
	n := float64(len(ins))
	f.AnsweredInDeadline, f.AnsweredLate, f.Fallback = float64(inTime)/n, float64(late)/n, float64(fallback)/n
	f.Other = float64(len(ins)-inTime-late-fallback) / n // not 1 minus the others: that prints -0.00 %
	f.Within120s = float64(within120) / n
	for i := range lat {
		f.Counted[i] = len(lat[i])
		f.P99[i] = time.Duration(quantile(lat[i], 0.99)) * time.Millisecond
	}
	slices.Sort(seen)
	prev := loadFrom
	for _, s := range seen {
		if s < loadFrom || s > loadTo {
			continue
		}
		if g := time.Duration(s-prev) * time.Millisecond; g > f.LongestGap {
			f.LongestGap, f.GapAt = g, prev
		}
		prev = s
	}
	if g := time.Duration(loadTo-prev) * time.Millisecond; g > f.LongestGap {
		f.LongestGap, f.GapAt = g, prev
	}
	return f
}

// quantile returns the q-quantile of xs (nearest rank), 0 for none.
func quantile(xs []int64, q float64) int64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// recovery returns how long after from results flowed at the offered rate
// again: the start of the first whole second (counted from from) that, with
// the sustain-1 seconds after it, each saw at least 95 % of rate results.
// ok is false when that never happened before until.
func recovery(seenMs []int64, from, until int64, rate float64, sustain int) (time.Duration, bool) {
	if until <= from {
		return 0, false
	}
	buckets := make([]int, (until-from)/1000+1)
	for _, s := range seenMs {
		if s >= from && s < until {
			buckets[(s-from)/1000]++
		}
	}
	need := int(math.Ceil(0.95 * rate))
	for i := 0; i+sustain <= len(buckets)-1; i++ { // the last bucket is partial
		ok := true
		for j := i; j < i+sustain; j++ {
			if buckets[j] < need {
				ok = false
				break
			}
		}
		if ok {
			return time.Duration(i) * time.Second, true
		}
	}
	return 0, false
}

func share(x float64) string { return fmt.Sprintf("%.2f%%", 100*x) }

func TestDrillFigures(t *testing.T) {
	const s = int64(1_000_000) // a load starting at 1000 s, in ms
	ins := []drillIntent{
		{sentMs: s, seenMs: s + 100, outcome: "answered"},              // before, in time
		{sentMs: s + 10, seenMs: s + 3000, outcome: "answered"},        // before, late (2 s deadline)
		{sentMs: s + 20, seenMs: s + 2100, outcome: "fallback_static"}, // before
		{sentMs: s + 5000, seenMs: s + 9000, outcome: "answered"},      // during, late
		{sentMs: s + 5010, seenMs: 0},                                  // during, never seen
		{sentMs: s + 9500, seenMs: s + 9600, outcome: "answered"},      // after
		{sentMs: s + 9510, seenMs: s + 9700, outcome: "rejected"},      // after
		{sentMs: s + 9520, seenMs: s + 9530, outcome: "shed"},          // after
	}
	if f := figures(append(slices.Clone(ins), drillIntent{sentMs: s, seenMs: s + 120_001, outcome: "answered"}), 2*time.Second, s+5000, s+9500, s, s+10_000); share(f.Within120s) != "77.78%" {
		t.Errorf("within 120 s: %s of 9, want 7 (one never seen, one at 120.001 s)", share(f.Within120s))
	}
	f := figures(ins, 2*time.Second, s+5000, s+9500, s, s+10_000)
	if f.Sent != 8 || share(f.AnsweredInDeadline) != "25.00%" || share(f.AnsweredLate) != "25.00%" || share(f.Fallback) != "12.50%" || share(f.Other) != "37.50%" {
		t.Errorf("shares: %+v", f)
	}
	// By phase: before 1 of 3 in time, none shed; during none; after 1 of 3 in time, 1 of 3 shed.
	if f.InDeadlineBy != [3]float64{1.0 / 3, 0, 1.0 / 3} || f.ShedBy != [3]float64{0, 0, 1.0 / 3} {
		t.Errorf("by phase: in deadline %v, shed %v", f.InDeadlineBy, f.ShedBy)
	}
	// Seen at +100, +2100, +3000, +9000, +9600, +9700 ms: the longest gap is +3000 → +9000.
	if f.LongestGap != 6*time.Second || f.GapAt != s+3000 {
		t.Errorf("longest gap %s at +%dms, want 6s at +3000ms", f.LongestGap, f.GapAt-s)
	}
	if f.P99 != [3]time.Duration{2990 * time.Millisecond, 4 * time.Second, 190 * time.Millisecond} || f.Counted != [3]int{3, 1, 3} {
		t.Errorf("p99 %v over %v", f.P99, f.Counted)
	}

	// Recovery: 500/s offered, a kill at 0; seconds 0-2 see 100/s, from 3 on 480/s (≥ 95 %).
	var seen []int64
	for sec := int64(0); sec < 10; sec++ {
		n := 100
		if sec >= 3 {
			n = 480
		}
		if sec == 5 {
			n = 470 // one dip below 95 % after recovery does not move it...
		}
		for i := 0; i < n; i++ {
			seen = append(seen, s+sec*1000+int64(i))
		}
	}
	if d, ok := recovery(seen, s, s+10_000, 500, 2); !ok || d != 3*time.Second {
		t.Errorf("recovery %s %v, want 3s", d, ok)
	}
	// ... but a sustain of 3 seconds skips past it.
	if d, ok := recovery(seen, s, s+10_000, 500, 3); !ok || d != 6*time.Second {
		t.Errorf("recovery (sustain 3) %s %v, want 6s", d, ok)
	}
	if _, ok := recovery(seen[:300], s, s+10_000, 500, 2); ok {
		t.Error("recovered without ever reaching the rate")
	}
	if quantile(nil, 0.99) != 0 || quantile([]int64{5}, 0.99) != 5 {
		t.Error("quantile of none or one")
	}
}
