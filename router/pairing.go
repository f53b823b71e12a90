package router

import (
	"errors"
	"fmt"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// Pairing. A response names its intent by request_id and, when its agent
// echoes it, tenant ("" for an intent without one). With a tenant it pairs
// with that tenant's intent only. Without one, it pairs with the one intent
// of that id (pending, or resolved within the dedup window, for late and
// duplicate answers) that was dispatched to the responding agent; when no
// intent of that id was, with the one intent of that id there is (the checks
// below then refuse it). When several tenants' intents qualify it is
// ambiguous: never credited to one of them by guess. So another tenant's
// intent of the same id that was never dispatched (rejected, shed) does not
// make an agent that does not echo tenants lose its answer.
//
// A response that cannot be an honest answer to the intent it names is
// dead-lettered (class invalid_response) and counted by reason, never
// credited: it names another agent than the one the intent was dispatched
// to, a tenant that has no intent of that id while another tenant has one,
// or an attempt that was never dispatched.

// Reasons of switchboard_responses_invalid_total.
const (
	invalidAgent     = "agent"     // another agent than the one the intent was dispatched to
	invalidTenant    = "tenant"    // a tenant without an intent of that id, while another has one
	invalidAttempt   = "attempt"   // an attempt never dispatched
	invalidAmbiguous = "ambiguous" // no tenant, and several tenants have an intent of that id
)

// onResponse handles one record of the responses topic.
func (e *engine) onResponse(rec *port.Record, t *track, nowMs int64) {
	resp := &e.scratch.resp
	if err := e.codec.Decode(rec.Value, resp); err != nil {
		e.deadLetter(rec, t, schemas.ErrorClass(err), err)
		return
	}
	if !validID(resp.RequestID) {
		e.deadLetter(rec, t, ClassInvalidResponse, errors.New(`field "request_id" is required and must be an intent id`))
		return
	}
	if resp.Tenant != nil && *resp.Tenant != "" && !intents.ValidLabel(*resp.Tenant) {
		e.deadLetter(rec, t, ClassInvalidResponse, errors.New(`field "tenant" is not a tenant`))
		return
	}
	defer e.readResponse(rec.Partition, rec.TimestampMs, nowMs)
	key, reason := e.pairKey(resp)
	if reason != "" {
		e.invalidResponse(rec, t, reason, resp)
		return
	}
	p := e.pending[key]
	if p == nil {
		if resp.Status == schemas.StatusProgress {
			e.strayProgress(key)
		}
		e.onStrayResponse(rec, resp, key, nowMs, t)
		return
	}
	if resp.Agent != p.agentName() {
		e.invalidResponse(rec, t, invalidAgent, resp)
		return
	}
	if resp.Attempt != nil && (*resp.Attempt < 1 || *resp.Attempt > p.lastDispatched()) || p.lastDispatched() == 0 {
		e.invalidResponse(rec, t, invalidAttempt, resp)
		return
	}
	// An answer from any attempt answers the intent. An error or a progress
	// message counts only for the attempt in flight: one from an attempt
	// already retried (by its attempt field, or because no attempt is in
	// flight) is stale.
	current := p.phase == phaseInFlight && (resp.Attempt == nil || *resp.Attempt == p.attempt)
	e.trace.responded(p, resp, rec, current, nowMs)
	switch resp.Status {
	case schemas.StatusOK:
		e.recordOutcome(p, outcomeAnswered, nowMs)
		e.remember(p.route, p.cacheKey, resp.Answer, nowMs, t)
		e.resolve(p, schemas.OutcomeAnswered, resp.Answer, nil, rec.TimestampMs, nowMs, t)
	case schemas.StatusError:
		if !current {
			e.m.staleResponses.Inc()
			return
		}
		info := resp.Error
		if info == nil {
			info = &schemas.ErrorInfo{Code: "agent_error", Message: "the agent reported an error without details"}
		}
		e.recordOutcome(p, outcomeErrored, nowMs)
		e.onAgentError(p, info, rec.TimestampMs, nowMs, t)
	case schemas.StatusProgress:
		e.onProgress(p, resp, current, t, nowMs)
	default:
		e.deadLetter(rec, t, ClassInvalidResponse, fmt.Errorf("status %q is not ok, error or progress", resp.Status))
	}
}

// pairKey returns the key of the intent a response answers ("" if none is
// known), or why it is invalid.
func (e *engine) pairKey(resp *schemas.AgentResponse) (key, invalid string) {
	id := resp.RequestID
	if resp.Tenant != nil {
		key = intents.Scoped(*resp.Tenant, id)
		if e.known(key) {
			return key, ""
		}
		if _, n := e.pendingIDs.only(id); n > 0 {
			return "", invalidTenant
		}
		if _, n := e.resolved.ids.only(id); n > 0 {
			return "", invalidTenant
		}
		return "", ""
	}
	// The intents of that id dispatched to this agent.
	match, n := "", 0
	ps, pn := e.pendingIDs.set(id)
	for i := range pn {
		k := intents.Scoped(ps.at(i), id)
		if p := e.pending[k]; p.agentName() == resp.Agent && p.lastDispatched() > 0 {
			match, n = k, n+1
		}
	}
	rs, rn := e.resolved.ids.set(id)
	for i := range rn {
		k := intents.Scoped(rs.at(i), id)
		if r, ok := e.resolved.get(k); ok && r.agent == resp.Agent && r.dispatched {
			match, n = k, n+1
		}
	}
	switch {
	case n == 1:
		return match, ""
	case n > 1:
		return "", invalidAmbiguous
	}
	// None: the one intent of that id there is, if any.
	pt, pn := e.pendingIDs.only(id)
	rt, rn := e.resolved.ids.only(id)
	switch {
	case pn+rn > 1:
		return "", invalidAmbiguous
	case pn == 1:
		return intents.Scoped(pt, id), ""
	case rn == 1:
		return intents.Scoped(rt, id), ""
	}
	return "", ""
}

// lastDispatched is the highest attempt of p ever dispatched (0: none): a
// response for a later one answers a request nobody was sent.
func (p *pending) lastDispatched() int32 {
	if p.phase == phaseQueued {
		if p.dispatched == 0 {
			return 0
		}
		return p.attempt - 1 // a retry waiting for capacity: not sent yet
	}
	return p.attempt
}

// invalidResponse dead-letters and counts a response that is not credited.
func (e *engine) invalidResponse(rec *port.Record, t *track, reason string, resp *schemas.AgentResponse) {
	e.m.invalidResponses.WithLabelValues(reason).Inc()
	var why string
	switch reason {
	case invalidAgent:
		why = fmt.Sprintf("agent %q is not the agent intent %s was dispatched to", resp.Agent, resp.RequestID)
	case invalidTenant:
		why = fmt.Sprintf("tenant %q has no intent %s", *resp.Tenant, resp.RequestID)
	case invalidAttempt:
		why = fmt.Sprintf("intent %s was never dispatched as that attempt", resp.RequestID)
	default:
		why = fmt.Sprintf("several tenants have an intent %s and the response names none: echo AgentRequest.tenant in AgentResponse.tenant", resp.RequestID)
	}
	e.deadLetter(rec, t, ClassInvalidResponse, errors.New(why))
}

// onStrayResponse handles a response for an intent that is not pending: late
// (it timed out: the answer refreshes the fallback cache), duplicate (it was
// already answered: ignored) or unknown.
func (e *engine) onStrayResponse(rec *port.Record, resp *schemas.AgentResponse, key string, nowMs int64, t *track) {
	done, ok := e.resolved.get(key)
	if !ok {
		e.m.unknownResp.Inc()
		e.log.Debug("response for an unknown intent", "intent_id", resp.RequestID, "agent", resp.Agent)
		return
	}
	if resp.Agent != done.agent {
		// Not the agent it was dispatched to (or it never was): its answer
		// is nobody's to cache.
		e.invalidResponse(rec, t, invalidAgent, resp)
		return
	}
	if done.outcome == schemas.OutcomeAnswered || done.outcome == schemas.OutcomeAgentError {
		e.m.dupResponses.Inc()
		return
	}
	done.route.m.late.Inc()
	e.lateAnswer(done, nowMs)
	if resp.Status == schemas.StatusOK {
		e.remember(done.route, done.cacheKey, resp.Answer, nowMs, t)
	}
}
