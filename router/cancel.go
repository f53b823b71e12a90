package router

import (
	"fmt"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/router/telemetry"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// ClassInvalidControl is the dead-letter class of a control record the
// router cannot act on: a cancel without a readable intent id, or an unknown
// kind of control.
const ClassInvalidControl = "invalid_control"

// controlOf returns the value of a record's control header, if it has one.
// (The Go agent runner reads the same header with Record.Header.)
func controlOf(rec *port.Record) (string, bool) {
	v, ok := rec.Header(intents.HeaderControl)
	return string(v), ok
}

// onControl handles a control record of the requests topic.
func (e *engine) onControl(rec *port.Record, control string, t *track, nowMs int64) {
	if control != intents.ControlCancel {
		e.deadLetter(rec, t, ClassInvalidControl, fmt.Errorf("control %q is not a kind the router knows (cancel)", control))
		return
	}
	c, err := intents.UnmarshalCancel(rec.Key, rec.Value)
	if err != nil {
		e.deadLetter(rec, t, ClassInvalidControl, err)
		return
	}
	e.cancel(c, nowMs, t)
}

// cancel resolves a pending intent (queued, in flight, waiting for a retry or
// held) cancelled, and tells its agent when the intent was dispatched. A
// cancel names (tenant, intent_id) like an intent: it reaches that intent
// only, so a cancel without a tenant never reaches a tenant's intent, and
// one tenant's never another's (counted forbidden, as if unknown). An intent
// this instance does not hold pending (unknown, or already resolved) is left
// alone: it has or will get its one result. The agent of an intent restored
// for an agent no longer configured is not told: it has no topic.
func (e *engine) cancel(c intents.Cancel, nowMs int64, t *track) {
	p := e.pending[intents.Scoped(c.Tenant, c.IntentID)]
	if p == nil {
		if other, n := e.pendingIDs.only(c.IntentID); n > 0 {
			// Another tenant's intent: left alone, as if unknown. The log
			// (the operator's) names its trace when only one tenant has it.
			var tp *string
			if q := e.pending[intents.Scoped(other, c.IntentID)]; n == 1 && q != nil {
				tp = q.traceparent
			}
			e.m.cancels.WithLabelValues("forbidden").Inc()
			e.log.Warn("cancel refused: the intent belongs to another tenant", "intent_id", c.IntentID, "trace_id", telemetry.TraceID(tp), "cancel_tenant", c.Tenant)
			return
		}
		e.m.cancels.WithLabelValues("ignored").Inc()
		return
	}
	// The notice names the intent's tenant, so that an agent serving two
	// tenants' intents of one id stops the right one.
	c.Tenant = intents.TenantOf(p.tenant)
	if p.dispatched != 0 && p.agent.dispatchable() {
		value, err := intents.MarshalCancel(c)
		if err != nil {
			e.encodeFailed(t, err)
			return
		}
		h := append(p.headers(), port.Header{Key: intents.HeaderControl, Value: []byte(intents.ControlCancel)})
		e.toAgent(&port.Output{Topic: p.agent.topic, Key: []byte(p.id), Value: value, Headers: h}, t)
	}
	msg := c.Reason
	if msg == "" {
		msg = "cancelled by the caller"
	}
	e.resolve(p, schemas.OutcomeCancelled, nil, &schemas.ErrorInfo{Code: "cancelled", Message: msg}, 0, nowMs, t)
	e.m.cancels.WithLabelValues("cancelled").Inc()
}
