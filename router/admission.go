package router

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// Admission: each agent takes at most max_in_flight intents at a time and at
// most rate dispatches per second; intents beyond that wait in its queue
// (FIFO, up to queue_limit) and are dispatched as capacity frees, unless
// their deadline passes first. An open circuit breaker admits nothing.
// Everything here is owned by the event loop.

// phase is where a pending intent stands.
type phase uint8

const (
	phaseNone     phase = iota // not admitted (being resolved at once)
	phaseQueued                // in its agent's queue, not dispatched
	phaseInFlight              // dispatched, waiting for the agent
	phaseRetry                 // failed with a retryable error, waiting to be dispatched again
)

type agentRoute struct {
	name  string
	topic string
	json  bool // the agent asked for JSON requests

	maxInFlight int     // 0: no bound
	rate        float64 // dispatches per second; 0: no bound
	burst       float64
	queueLimit  int // 0: no bound
	breaker     *breaker

	// Overload (overload.go): late shedding and the adaptive in-flight limit.
	shedsLate bool
	latency   answerLatency
	limit     inFlightLimit

	inFlight   int
	queue      []*pending // FIFO; entries no longer queued are skipped
	queued     int
	tokens     float64
	refilledAt int64
	woken      bool // capacity freed: the queue is pumped after the event

	circuit   prometheus.Gauge // nil without a breaker
	inFlightG prometheus.Gauge
	queuedG   prometheus.Gauge
	limitG    prometheus.Gauge // the adaptive limit (overload.go)
	latencyG  prometheus.Gauge // the typical answer time (overload.go)
}

func newAgentRoute(name string, a *config.Agent, m *metrics, nowMs int64) *agentRoute {
	ar := &agentRoute{
		name: name, topic: a.Topic, json: a.Encoding == config.EncodingJSON,
		maxInFlight: a.MaxInFlight, rate: a.Rate, queueLimit: a.QueueLimit, breaker: newBreaker(a.CircuitBreaker),
		refilledAt: nowMs,
	}
	ar.burst = max(a.Rate, 1)
	ar.tokens = ar.burst
	ar.overloadOf(a)
	if ar.breaker != nil {
		ar.circuit = m.circuitState.WithLabelValues(name)
	}
	ar.inFlightG = m.agentInFlight.WithLabelValues(name)
	ar.queuedG = m.agentQueued.WithLabelValues(name)
	ar.limitG = m.inFlightLimit.WithLabelValues(name)
	ar.latencyG = m.latencySeconds.WithLabelValues(name)
	return ar
}

// dispatchable reports whether intents can be sent to the agent: not one
// restored for an agent no longer configured, which has no topic.
func (a *agentRoute) dispatchable() bool { return a.topic != "" }

// hasCapacity reports whether a dispatch may go out now.
func (a *agentRoute) hasCapacity(nowMs int64) bool {
	if c := a.inFlightCap(); c > 0 && a.inFlight >= c {
		return false
	}
	if a.rate > 0 {
		if nowMs > a.refilledAt {
			a.tokens = min(a.burst, a.tokens+float64(nowMs-a.refilledAt)*a.rate/1000)
			a.refilledAt = nowMs
		}
		if a.tokens < 1 {
			return false
		}
	}
	return true
}

// admit dispatches a new intent (or a retry) when its agent has capacity,
// queues it when not, and resolves it at once when the circuit is open, the
// queue is full, or it is too late to be answered in time (overload.go).
func (e *engine) admit(p *pending, nowMs int64, t *track) {
	a := p.agent
	if a.breaker != nil && !a.breaker.admits(nowMs) {
		e.timeOut(p, nowMs, schemas.ReasonCircuitOpen, t)
		return
	}
	if a.late(p, nowMs) {
		e.shed(p, shedLate, nowMs, t)
		return
	}
	if a.queued == 0 && a.hasCapacity(nowMs) {
		e.dispatch(p, nowMs, t)
		return
	}
	if a.queueLimit > 0 && a.queued >= a.queueLimit {
		e.shed(p, shedQueueFull, nowMs, t)
		return
	}
	e.enqueue(p, nowMs, t)
}

// enqueue puts an intent in its agent's queue and records it in the pending
// changelog, so that a takeover queues it again.
func (e *engine) enqueue(p *pending, nowMs int64, t *track) {
	p.phase = phaseQueued
	p.retryAt, p.idleAt = 0, 0
	if !e.persist(p, nowMs, t) {
		e.unpersisted(p, nowMs, t)
		return
	}
	e.join(p)
	e.schedule(p)
}

// join adds a queued intent to the pending table and its agent's queue.
func (e *engine) join(p *pending) {
	a := p.agent
	e.keep(p)
	a.queue = append(a.queue, p)
	a.queued++
	if len(a.queue) > 2*a.queued+64 { // drop the entries that left
		keep := a.queue[:0]
		for _, q := range a.queue {
			if q.phase == phaseQueued && e.isPending(q) {
				keep = append(keep, q)
			}
		}
		clear(a.queue[len(keep):])
		a.queue = keep
	}
}

// leave ends an intent's claim on its agent's admission: it is resolving,
// waiting for a retry, or handed over.
func (e *engine) leave(p *pending) {
	a := p.agent
	switch p.phase {
	case phaseInFlight:
		a.inFlight--
		if p.probe != 0 && a.breaker != nil { // a reload may have removed it
			a.breaker.release(p.probe)
			p.probe = 0
		}
		e.wake(a)
	case phaseQueued:
		a.queued--
	}
	p.phase = phaseNone
}

// wake marks an agent whose queue may move: flush pumps it once the current
// event is handled (pumping inside a resolution would nest resolutions).
func (e *engine) wake(a *agentRoute) {
	if a.queued > 0 && !a.woken {
		a.woken = true
		e.woken = append(e.woken, a)
	}
}

// flush pumps the queues of the agents woken by the last event.
func (e *engine) flush(nowMs int64) {
	for len(e.woken) > 0 {
		a := e.woken[len(e.woken)-1]
		e.woken = e.woken[:len(e.woken)-1]
		a.woken = false
		e.pump(a, nowMs)
	}
}

// pump dispatches queued intents while the agent has capacity, sheds those
// too late to be answered in time, and resolves them all with circuit_open
// while its circuit is open.
func (e *engine) pump(a *agentRoute, nowMs int64) {
	for a.queued > 0 {
		reason := schemas.TimeoutReason("")
		if a.breaker != nil && !a.breaker.admits(nowMs) {
			if a.breaker.current(nowMs) != circuitOpen {
				return // half-open: wait for the probes
			}
			reason = schemas.ReasonCircuitOpen
		} else if !a.hasCapacity(nowMs) {
			return
		}
		p := e.dequeue(a)
		if p == nil {
			return
		}
		switch {
		case reason != "":
			e.timeOut(p, nowMs, reason, nil)
		case a.late(p, nowMs):
			e.shed(p, shedLate, nowMs, nil)
		default:
			e.dispatch(p, nowMs, nil)
		}
	}
}

// dequeue takes the first intent still queued off an agent's queue.
func (e *engine) dequeue(a *agentRoute) *pending {
	for len(a.queue) > 0 {
		p := a.queue[0]
		a.queue[0] = nil
		a.queue = a.queue[1:]
		if p.phase == phaseQueued && e.isPending(p) {
			a.queued--
			p.phase = phaseNone
			return p
		}
	}
	return nil
}

// pumpAll moves every queue on a tick: tokens refill and breakers cool down
// with time alone.
func (e *engine) pumpAll(nowMs int64) {
	for _, a := range e.agentList {
		if a.queued > 0 {
			e.pump(a, nowMs)
		}
	}
}

// AgentView is an agent's admission state, as the API's agent view shows it.
type AgentView struct {
	Name        string `json:"name"`
	Circuit     string `json:"circuit"` // closed, open, half_open, or none without a breaker
	InFlight    int    `json:"in_flight"`
	Queued      int    `json:"queued"`
	MaxInFlight int    `json:"max_in_flight,omitempty"`
	// InFlightLimit is what may be in flight now: the adaptive limit, else
	// MaxInFlight; absent: no bound.
	InFlightLimit int `json:"in_flight_limit,omitempty"`
	// AnswerLatencyMs is the agent's typical answer time, which late
	// shedding uses.
	AnswerLatencyMs int64   `json:"answer_latency_ms,omitempty"`
	Rate            float64 `json:"rate,omitempty"`
	QueueLimit      int     `json:"queue_limit,omitempty"`
}

// agentViews snapshots every configured agent and updates their gauges.
func (e *engine) agentViews(nowMs int64) []AgentView {
	views := make([]AgentView, 0, len(e.agentList))
	for _, a := range e.agentList {
		v := AgentView{
			Name: a.name, Circuit: "none", InFlight: a.inFlight, Queued: a.queued,
			MaxInFlight: a.maxInFlight, Rate: a.rate, QueueLimit: a.queueLimit,
			InFlightLimit: a.inFlightCap(), AnswerLatencyMs: a.latency.expected(),
		}
		if a.breaker != nil {
			s := a.breaker.current(nowMs)
			v.Circuit = s.String()
			a.circuit.Set(float64(s))
		}
		a.inFlightG.Set(float64(a.inFlight))
		a.queuedG.Set(float64(a.queued))
		a.limitG.Set(float64(v.InFlightLimit))
		a.latencyG.Set(float64(v.AnswerLatencyMs) / 1000)
		views = append(views, v)
	}
	return views
}

// recordOutcome tells an agent's breaker and overload rules how a dispatch
// ended.
func (e *engine) recordOutcome(p *pending, o dispatchOutcome, nowMs int64) {
	if p.phase != phaseInFlight {
		return
	}
	p.agent.observe(p, o, nowMs)
	b := p.agent.breaker
	if b == nil {
		return
	}
	before := b.current(nowMs)
	after := b.record(nowMs, o != outcomeAnswered, p.probe)
	p.probe = 0
	if after != before {
		a := p.agent
		a.circuit.Set(float64(after))
		e.log.Log(context.Background(), logLevelCircuit(after), "circuit breaker", "agent", a.name, "from", before.String(), "to", after.String())
		if after == circuitOpen {
			e.wake(a) // the queue resolves circuit_open
		}
	}
}

func logLevelCircuit(s circuitState) slog.Level {
	if s == circuitOpen {
		return slog.LevelWarn
	}
	return slog.LevelInfo
}
