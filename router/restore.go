package router

import (
	"cmp"
	"slices"

	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/router/telemetry"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// restore takes over the pending intents of a partition this instance was
// just assigned. Their timers resume at their original deadlines; those whose
// deadline passed while no instance owned the partition are held until the
// responses that arrived meanwhile have been read (see readResponse), then
// time out if no answer came.
//
// Queued intents go back to their agent's queue in the order they were
// received, behind the intents already queued; restored in-flight intents
// count against their agent's max_in_flight; a scheduled retry keeps its time
// and attempt, an in-flight intent its idle deadline.
//
// Each keeps the changelog key it was read under, so that its next record
// and its tombstone replace that one, whatever key a new intent of the same
// tenant and id would get (records from before tenants were scoped are keyed
// by the bare id).
func (e *engine) restore(partition int32, entries []port.PendingRecord, nowMs int64) (restored, held int) {
	var queued []*pending
	for _, rec := range entries {
		pi := rec.Intent
		key := intentKey(pi.Tenant, pi.IntentID)
		if e.known(key) {
			continue
		}
		r := e.routes[pi.IntentType]
		if r == nil {
			r = &route{name: pi.IntentType, m: e.unknown.m}
			if pi.ResolvedAt == nil {
				e.log.Warn("restored an intent whose type is no longer configured: it will time out without fallback", "intent_id", pi.IntentID, "intent_type", pi.IntentType, "trace_id", telemetry.TraceID(pi.Traceparent))
			}
		}
		if pi.ResolvedAt != nil {
			outcome := schemas.OutcomeUnknown
			if pi.Outcome != nil {
				outcome = schemas.Outcome(*pi.Outcome)
			}
			e.resolved.restore(key, resolvedEntry{
				route: r, agent: pi.Agent, cacheKey: pi.CacheKey, logKey: rec.Key, outcome: outcome,
				partition: partition, persisted: true, dispatched: pi.DispatchedAt != 0,
			})
			continue
		}
		agent := e.agents[pi.Agent]
		if agent == nil {
			agent = &agentRoute{name: pi.Agent}
		}
		p := &pending{
			id: pi.IntentID, key: key, logKey: rec.Key, route: r, agent: agent, partition: partition, cacheKey: pi.CacheKey, payload: pi.Payload,
			contextRef: pi.ContextRef, sessionID: pi.SessionID, tenant: pi.Tenant, traceparent: pi.Traceparent,
			recordTs: pi.RecordTs, receivedAt: pi.ReceivedAt, dispatched: pi.DispatchedAt, inherited: pi.DispatchedAt != 0, deadline: pi.Deadline,
			attempt: pi.Attempt, persisted: true, contextVersion: pi.ContextVersion, contextTs: pi.ContextTs,
		}
		p.readProgress(pi)
		restored++
		// An intent for an agent no longer configured cannot be dispatched:
		// whatever its phase, it waits for its deadline and its fallback.
		configured := agent.dispatchable()
		switch {
		case configured && pi.Queued != nil && *pi.Queued:
			// Back in its agent's queue, behind the intents already there.
			if p.deadline <= nowMs && p.dispatched == 0 {
				e.timeOut(p, nowMs, schemas.ReasonDeadline, nil)
				continue
			}
			if p.deadline <= nowMs {
				// A retry that was waiting in the queue: an answer to an
				// earlier attempt may still be unread.
				e.keep(p)
				e.hold(p, nowMs)
				held++
				continue
			}
			queued = append(queued, p)
			continue
		case configured && pi.RetryAt != nil:
			p.phase, p.retryAt = phaseRetry, *pi.RetryAt
			e.keep(p)
			e.schedule(p) // a retry already due goes out on the next tick
			continue
		}
		p.phase = phaseInFlight
		agent.inFlight++
		if pi.IdleDeadline != nil {
			p.idleAt = *pi.IdleDeadline
		}
		e.keep(p)
		if p.deadline > nowMs {
			e.schedule(p)
			continue
		}
		e.hold(p, nowMs)
		held++
	}
	slices.SortStableFunc(queued, func(a, b *pending) int { return cmp.Compare(a.receivedAt, b.receivedAt) })
	for _, p := range queued {
		p.phase = phaseQueued
		e.join(p)
		e.schedule(p)
		e.wake(p.agent)
	}
	return restored, held
}
