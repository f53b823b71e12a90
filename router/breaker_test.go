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
		if s := b.record(now+int64(i)*10, failed, false); s != circuitClosed {
			t.Fatalf("outcome %d opened the circuit before min_requests", i)
		}
	}
	// Outcomes older than the window no longer count.
	now += 2000
	for i, failed := range []bool{false, false, true} {
		if s := b.record(now+int64(i)*10, failed, false); s != circuitClosed {
			t.Fatalf("outcome %d: opened on outcomes outside the window", i)
		}
	}
	if s := b.record(now+40, true, false); s != circuitOpen {
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
	if !p1 || !p2 || p3 {
		t.Fatalf("probes %v %v, third admitted %v", p1, p2, p3)
	}
	b.release() // a probe cancelled: another may go
	if !b.admits(now) {
		t.Fatal("a released probe was not given back")
	}
	b.dispatched(now)
	b.record(now, false, true)
	if s := b.record(now, false, true); s != circuitClosed {
		t.Fatalf("two good probes: %v", s)
	}
}
