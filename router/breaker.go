package router

import "github.com/switchboard-mcp/switchboard/router/config"

// circuitState is a breaker's state; its value is the
// switchboard_agent_circuit_state gauge.
type circuitState int

const (
	circuitClosed   circuitState = 0
	circuitOpen     circuitState = 1
	circuitHalfOpen circuitState = 2
)

func (s circuitState) String() string {
	switch s {
	case circuitOpen:
		return "open"
	case circuitHalfOpen:
		return "half_open"
	default:
		return "closed"
	}
}

// windowBuckets divide a breaker's error-rate window.
const windowBuckets = 10

// breaker is one agent's circuit breaker. It is owned by the event loop.
// Closed, it counts outcomes: N failures in a row, or an error rate over the
// window (once min_requests outcomes were seen), open it. Open, it admits
// nothing until open_for has passed; then, half-open, it admits
// half_open_probes intents: all succeed and it closes, one fails and it opens
// again. Outcomes of intents dispatched before it opened do not count while
// it is open or half-open, nor do those of probes of an earlier half-open
// period.
type breaker struct {
	consecutiveMax int
	rate           float64
	minRequests    int
	bucketMs       int64
	openMs         int64
	probes         int

	state       circuitState
	openUntil   int64
	consecutive int
	buckets     [windowBuckets]outcomeBucket
	probed      int        // probes dispatched in this half-open period
	epoch       probeEpoch // how many times it opened: probes of an older period do not count
	succeeded   int        // probes that succeeded
}

type outcomeBucket struct {
	slot         int64 // nowMs / bucketMs of the outcomes it counts
	total, fails int
}

func newBreaker(c *config.CircuitBreaker) *breaker {
	if c == nil {
		return nil
	}
	return &breaker{
		consecutiveMax: c.ConsecutiveFailures,
		rate:           c.ErrorRate,
		minRequests:    c.MinRequests,
		bucketMs:       max(c.Window.D().Milliseconds()/windowBuckets, 1),
		openMs:         c.OpenFor.D().Milliseconds(),
		probes:         c.HalfOpenProbes,
	}
}

// current returns the state at nowMs: an open circuit whose cool-down has
// passed is half-open.
func (b *breaker) current(nowMs int64) circuitState {
	if b.state == circuitOpen && nowMs >= b.openUntil {
		b.state, b.probed, b.succeeded = circuitHalfOpen, 0, 0
	}
	return b.state
}

// admits reports whether an intent may be dispatched now.
func (b *breaker) admits(nowMs int64) bool {
	switch b.current(nowMs) {
	case circuitOpen:
		return false
	case circuitHalfOpen:
		return b.probed < b.probes
	}
	return true
}

// probeEpoch identifies the half-open period a probe was dispatched in; 0:
// not a probe.
type probeEpoch uint64

// dispatched notes a dispatch; it returns the half-open period of a probe,
// 0 when it is not one.
func (b *breaker) dispatched(nowMs int64) probeEpoch {
	if b.current(nowMs) != circuitHalfOpen {
		return 0
	}
	b.probed++
	return b.epoch
}

// release gives back a probe that resolved without an outcome (cancelled).
// A probe of an earlier half-open period gives nothing back.
func (b *breaker) release(probe probeEpoch) {
	if b.state == circuitHalfOpen && probe == b.epoch && b.probed > 0 {
		b.probed--
	}
}

// record counts one outcome of a dispatch (probe: its dispatched value) and
// returns the state after it.
func (b *breaker) record(nowMs int64, failed bool, probe probeEpoch) circuitState {
	switch b.current(nowMs) {
	case circuitOpen:
		return circuitOpen
	case circuitHalfOpen:
		if probe == 0 || probe != b.epoch {
			return circuitHalfOpen
		}
		if failed {
			b.open(nowMs)
			return circuitOpen
		}
		b.succeeded++
		if b.succeeded >= b.probes {
			b.close()
		}
		return b.state
	}
	if failed {
		b.consecutive++
	} else {
		b.consecutive = 0
	}
	slot := nowMs / b.bucketMs
	bk := &b.buckets[slot%windowBuckets]
	if bk.slot != slot {
		*bk = outcomeBucket{slot: slot}
	}
	bk.total++
	if failed {
		bk.fails++
	}
	if b.consecutiveMax > 0 && b.consecutive >= b.consecutiveMax {
		b.open(nowMs)
	} else if b.rate > 0 && failed {
		total, fails := 0, 0
		for _, k := range b.buckets {
			if k.slot > slot-windowBuckets {
				total += k.total
				fails += k.fails
			}
		}
		if total >= b.minRequests && float64(fails) >= b.rate*float64(total) {
			b.open(nowMs)
		}
	}
	return b.state
}

func (b *breaker) open(nowMs int64) {
	b.state, b.openUntil = circuitOpen, nowMs+b.openMs
	b.epoch++
}

func (b *breaker) close() {
	b.state, b.consecutive, b.buckets = circuitClosed, 0, [windowBuckets]outcomeBucket{}
}
