package router

import (
	"time"

	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// retryPolicy is an intent type's retry setting, in milliseconds.
type retryPolicy struct {
	max        int32
	backoff    int64
	maxBackoff int64
}

func newRetryPolicy(r *config.Retry) *retryPolicy {
	if r == nil || r.MaxRetries == 0 {
		return nil
	}
	return &retryPolicy{max: int32(r.MaxRetries), backoff: ms(r.Backoff.D()), maxBackoff: ms(r.MaxBackoff.D())}
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// delay is the backoff before dispatching attempt+1: backoff doubled per
// attempt so far, capped at max_backoff, of which a random half is jitter
// (a delay d is drawn from [d/2, d]).
func (rp *retryPolicy) delay(attempt int32, rnd func(n int64) int64) int64 {
	d := rp.backoff
	for i := int32(1); i < attempt && d < rp.maxBackoff; i++ {
		d *= 2
	}
	d = min(d, rp.maxBackoff)
	half := d / 2
	return d - half + rnd(half+1)
}

// onAgentError handles an error from the attempt in flight: a retryable one
// is dispatched again after a backoff while retries remain and the deadline
// allows; otherwise the intent resolves agent_error with the agent's error
// and, when the type has one, its fallback answer. An intent of an agent no
// longer configured is never retried: it cannot be dispatched.
func (e *engine) onAgentError(p *pending, info *schemas.ErrorInfo, answeredAt, nowMs int64, t *track) {
	if rp := p.route.retry; rp != nil && info.Retryable && p.agent.dispatchable() && p.attempt <= rp.max {
		at := nowMs + rp.delay(p.attempt, e.rnd)
		if at < p.deadline {
			e.leave(p)
			p.phase, p.retryAt, p.idleAt = phaseRetry, at, 0
			if !e.persist(p, nowMs, t) {
				e.unpersisted(p, nowMs, t)
				return
			}
			e.schedule(p)
			p.route.m.retries.Inc()
			return
		}
	}
	answer, _, _ := e.fallback(p, nowMs)
	e.resolve(p, schemas.OutcomeAgentError, answer, info, answeredAt, nowMs, t)
}

// retryNow dispatches a failed intent again, through admission, when its
// backoff has passed.
func (e *engine) retryNow(p *pending, nowMs int64) {
	p.phase, p.retryAt = phaseNone, 0
	if nowMs >= p.deadline {
		e.timeOut(p, nowMs, schemas.ReasonDeadline, nil)
		return
	}
	p.attempt++
	e.admit(p, nowMs, nil)
}
