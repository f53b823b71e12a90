package router

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// Overload: how an agent's intents degrade past its knee (agents.<name>.overload).
// Two rules, both owned by the event loop:
//
//   - Late shedding. An intent never dispatched is shed (reason shed, with its
//     fallback) instead of dispatched when the time it already waited plus the
//     agent's typical answer time leaves no room before its deadline:
//     nowMs + expected > deadline, its answer more likely than not late.
//     The expected time is a smoothed dispatch-to-answer time (RFC 6298's
//     SRTT gain, 1/8) of the agent's answers (ok or error), late ones
//     included (without them the estimate would see only the answers fast
//     enough to count, and fall behind an agent slowing down), and not of
//     timeouts: a timeout says the agent did not answer, not how long it
//     takes, and one ignored intent must not make every later one look
//     late. It is the typical time, not an upper bound: shedding on a bound
//     would shed most intents of an agent that answers close to its
//     timeout, many of which it would answer in time. It is checked at
//     intake and when an intent leaves its agent's queue, once minSamples
//     answers were seen. With nothing in flight to the agent nothing is shed
//     by it: the next dispatch is the probe that refreshes a stale estimate.
//     The probe's answer (or that of any later dispatch, whichever comes
//     first) replaces the estimate, as RFC 6298 re-initialises SRTT after a
//     backoff, and answers to dispatches older than the probe no longer
//     count. Otherwise, after an outage, the answers delayed by it leave an
//     estimate of seconds that only one probe at a time (each moving it by
//     1/8) could bring down, and every intent with room is shed meanwhile
//     (the drill measured 8-18 s of one router shedding all of its intents
//     after each broker restart while the other answered its half within
//     the deadline; BENCHMARKS.md). An intent dispatched by a previous owner
//     of its partition (restored at a takeover) feeds nothing: its answer
//     time spans the takeover, not the agent's work.
//   - Adaptive in-flight limit (AIMD), for an agent with max_in_flight. It
//     starts there; a dispatched intent reaching its deadline halves it from
//     what was in flight (at most once per round trip: a timeout of an intent
//     dispatched before the last cut is the same congestion), never below
//     min_in_flight; each answer while the limit binds raises it by 1/limit
//     (one per limit's worth of answers), never above max_in_flight. Excess
//     waits in the queue, where late shedding and the deadline resolve it
//     without dispatching it. An idle timeout is one intent's silence, not
//     congestion: it does not cut. An agent without max_in_flight has no
//     limit to adapt (nothing says how far it may grow back).

// dispatchOutcome is how an intent in flight ended, for its agent's breaker
// and overload rules.
type dispatchOutcome uint8

const (
	outcomeAnswered dispatchOutcome = iota // an answer
	outcomeErrored                         // an error response
	outcomeTimedOut                        // its deadline passed
	outcomeIdle                            // its idle timeout passed
)

// Causes of switchboard_intents_shed_total.
const (
	shedLate      = "late"       // no room before its deadline for its agent's answer
	shedQueueFull = "queue_full" // its agent's queue held queue_limit
)

// minSamples: answers seen before late shedding trusts the estimate (its
// gain is 1/8).
const minSamples = 8

// answerLatency estimates how long an agent takes to answer, in ms: the
// smoothed dispatch-to-answer time (gain 1/8, as RFC 6298's SRTT).
//
// Late shedding compares against this typical time, not an upper bound
// (the smoothed time plus deviations): an intent is shed only when its
// answer would more likely than not come after its deadline. With an upper
// bound, an agent whose answers take close to its intents' timeout (a
// mean of 800 ms with a 200 ms spread under a 1 s timeout) would have a
// bound past the timeout, and every intent but the probe would be shed
// although about half of them would be answered in time.
type answerLatency struct {
	srtt    float64
	samples int
	probeAt int64 // ms: an outstanding probe's dispatch (an intent the estimate called late, sent with nothing in flight); 0: none
	since   int64 // ms: answers to dispatches before this predate the last probe, and do not count
}

// observe feeds an answer, seen at nowMs, to a dispatch at dispatchedMs.
// The first answer to a dispatch at or after an outstanding probe replaces
// the estimate; answers to dispatches before the last such probe are
// ignored.
func (l *answerLatency) observe(dispatchedMs, nowMs int64) {
	if dispatchedMs < l.since {
		return
	}
	ms := float64(max(nowMs-dispatchedMs, 0))
	switch {
	case l.samples == 0:
		l.srtt = ms
	case l.probeAt != 0 && dispatchedMs >= l.probeAt:
		l.srtt, l.since, l.probeAt = ms, l.probeAt, 0
	default:
		l.srtt += (ms - l.srtt) / 8
	}
	l.samples++
}

// stale reports whether an intent with deadline would be shed by the
// estimate, and so is a probe when it goes with nothing in flight.
func (l *answerLatency) stale(nowMs, deadline int64) bool {
	b := l.expected()
	return l.samples >= minSamples && b > 0 && nowMs+b > deadline
}

// expected is the agent's typical answer time in ms; 0 before the first
// sample.
func (l *answerLatency) expected() int64 {
	if l.samples == 0 {
		return 0
	}
	return int64(math.Ceil(l.srtt))
}

// inFlightLimit is an agent's adaptive in-flight limit.
type inFlightLimit struct {
	on    bool
	floor float64
	limit float64 // between floor and max_in_flight
	cutAt int64   // ms: the last cut; timeouts of intents dispatched before it do not cut again
}

// overloadOf sets up an agent's overload state from its configuration (at
// start and on a reload, after max_in_flight): the limit starts again from
// max_in_flight; the answer time estimate learnt so far is kept.
func (a *agentRoute) overloadOf(c *config.Agent) {
	o := &c.Overload
	a.shedsLate = o.ShedsLate()
	a.limit = inFlightLimit{on: o.Adapts() && a.maxInFlight > 0, floor: float64(max(o.MinInFlight, 1)), cutAt: a.limit.cutAt}
	if a.limit.on {
		a.limit.limit = max(float64(a.maxInFlight), a.limit.floor)
	}
}

// inFlightCap is how many intents may be in flight to the agent now: the
// adaptive limit, else max_in_flight; 0: no bound.
func (a *agentRoute) inFlightCap() int {
	if a.limit.on {
		return int(a.limit.limit)
	}
	return a.maxInFlight
}

// late reports whether p, never dispatched, would more likely than not be
// answered after its deadline: its agent's typical answer time does not fit
// in what is left. With nothing in flight it is not, and is the probe whose
// answer replaces the estimate (the caller dispatches it, or queues it
// behind a rate limit).
func (a *agentRoute) late(p *pending, nowMs int64) bool {
	if !a.shedsLate || p.dispatched != 0 || !a.latency.stale(nowMs, p.deadline) {
		return false
	}
	if a.inFlight == 0 {
		if a.latency.probeAt == 0 {
			a.latency.probeAt = nowMs
		}
		return false
	}
	return true
}

// observe feeds how a dispatch ended to its agent's answer time estimate and
// in-flight limit. p is in flight (its agent's inFlight counts it).
func (a *agentRoute) observe(p *pending, o dispatchOutcome, nowMs int64) {
	if o == outcomeIdle {
		return
	}
	if o != outcomeTimedOut && p.dispatched != 0 && !p.inherited {
		a.latency.observe(p.dispatched, nowMs)
	}
	l := &a.limit
	if !l.on {
		return
	}
	if o == outcomeTimedOut {
		if p.dispatched < l.cutAt {
			return
		}
		base := float64(a.inFlight)
		if l.limit > 0 {
			base = min(base, l.limit)
		}
		l.limit, l.cutAt = max(l.floor, math.Floor(base/2)), nowMs
		return
	}
	if float64(a.inFlight) >= math.Floor(l.limit) {
		l.limit += 1 / l.limit
		l.limit = min(l.limit, float64(a.maxInFlight))
	}
}

// lateAnswer feeds a late answer's latency (from its intent's last dispatch
// to now) to its agent's answer time estimate; it changes nothing else.
func (e *engine) lateAnswer(done resolvedEntry, nowMs int64) {
	if a := e.agents[done.agent]; a != nil && done.dispatchedAt != 0 {
		a.latency.observe(done.dispatchedAt, nowMs)
	}
}

// ownDispatch is when this router dispatched p (ms); 0: never, or only a
// previous owner did (a restored intent not dispatched again).
func (p *pending) ownDispatch() int64 {
	if p.inherited {
		return 0
	}
	return p.dispatched
}

// shed resolves p at once with its fallback (outcome shed, timeout reason
// shed), never dispatched.
func (e *engine) shed(p *pending, cause string, nowMs int64, t *track) {
	e.m.shed.WithLabelValues(p.agent.name, cause).Inc()
	e.timeOut(p, nowMs, schemas.ReasonShed, t)
}

// overloadMetrics are the agents' overload series.
type overloadMetrics struct {
	shed           *prometheus.CounterVec
	inFlightLimit  *prometheus.GaugeVec
	latencySeconds *prometheus.GaugeVec
}

func newOverloadMetrics(reg prometheus.Registerer) (overloadMetrics, error) {
	m := overloadMetrics{
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_intents_shed_total",
			Help: "Intents shed at once with their fallback (outcome shed), never dispatched, by agent and cause: late (the time they waited plus the agent's typical answer time left no room before their deadline) or queue_full (queue_limit).",
		}, []string{"agent", "cause"}),
		inFlightLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_agent_in_flight_limit",
			Help: "The intents an agent may have in flight now: its adaptive limit (lowered while its intents time out), else max_in_flight; 0: no bound.",
		}, []string{"agent"}),
		latencySeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_agent_answer_latency_seconds",
			Help: "An agent's typical answer time (smoothed dispatch-to-answer time): an intent that waited so long that this leaves no room before its deadline is shed.",
		}, []string{"agent"}),
	}
	for _, c := range []prometheus.Collector{m.shed, m.inFlightLimit, m.latencySeconds} {
		if err := reg.Register(c); err != nil {
			return m, err
		}
	}
	return m, nil
}
