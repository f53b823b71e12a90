package router

import (
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/router/config"
)

func TestBreakerOpensOnErrorRateOverTheWindow(t *testing.T) {
	b := newBreaker(&config.CircuitBreaker{ErrorRate: 0.5, Window: config.Duration(time.Second), MinRequests: 4, OpenFor: config.Duration(time.Second), HalfOpenProbes: 2})
	now := int64(10_000)
	// Failures spread out: never consecutive, and below min_requests at first.
	for i, failed := range []bool{true, false, true} {
		if s := b.record(now+int64(i)*10, failed, 0); s != circuitClosed {
			t.Fatalf("outcome %d opened the circuit before min_requests", i)
		}
	}
	// Outcomes older than the window no longer count.
	now += 2000
	for i, failed := range []bool{false, false, true} {
		if s := b.record(now+int64(i)*10, failed, 0); s != circuitClosed {
			t.Fatalf("outcome %d: opened on outcomes outside the window", i)
		}
	}
	if s := b.record(now+40, true, 0); s != circuitOpen {
		t.Fatalf("2 failures of 4 in the window at a 0.5 rate: %v", s)
	}
	if b.admits(now + 999) {
		t.Fatal("admits while open")
	}
	now += 1040
	if !b.admits(now) || b.current(now) != circuitHalfOpen {
		t.Fatal("not half-open after open_for")
	}
	p1, p2, p3 := b.dispatched(now), b.dispatched(now), b.admits(now)
	if p1 == 0 || p2 == 0 || p3 {
		t.Fatalf("probes %v %v, third admitted %v", p1, p2, p3)
	}
	b.release(p2) // a probe cancelled: another may go
	if !b.admits(now) {
		t.Fatal("a released probe was not given back")
	}
	p4 := b.dispatched(now)
	b.record(now, false, p1)
	if s := b.record(now, false, p4); s != circuitClosed {
		t.Fatalf("two good probes: %v", s)
	}
}

// TestBreakerProbesOfAnEarlierHalfOpenPeriodDoNotCount: a probe still in
// flight when another probe failed and reopened the circuit belongs to that
// period: its outcome, or its release, does not count in the next one.
func TestBreakerProbesOfAnEarlierHalfOpenPeriodDoNotCount(t *testing.T) {
	b := newBreaker(&config.CircuitBreaker{ConsecutiveFailures: 1, Window: config.Duration(time.Second), MinRequests: 1, OpenFor: config.Duration(time.Second), HalfOpenProbes: 3})
	now := int64(10_000)
	if s := b.record(now, true, 0); s != circuitOpen {
		t.Fatalf("one failure: %v", s)
	}
	now += 1000
	old1, old2, old3 := b.dispatched(now), b.dispatched(now), b.dispatched(now)
	if s := b.record(now, true, old1); s != circuitOpen {
		t.Fatalf("a failed probe: %v", s)
	}
	now += 1000
	if b.current(now) != circuitHalfOpen {
		t.Fatal("not half-open again")
	}
	p1, p2, p3 := b.dispatched(now), b.dispatched(now), b.dispatched(now)
	b.release(old3) // an old probe cancelled: no extra probe now
	if b.admits(now) {
		t.Fatal("an old probe's release let a fourth probe through")
	}
	if s := b.record(now, false, old2); s != circuitHalfOpen {
		t.Fatalf("an old probe's success counted: %v", s)
	}
	b.record(now, false, p1)
	if s := b.record(now, false, p2); s != circuitHalfOpen {
		t.Fatalf("closed after two of three probes of this period: %v", s)
	}
	if s := b.record(now, false, p3); s != circuitClosed {
		t.Fatalf("all probes of this period succeeded: %v", s)
	}
}
