package router

// The pending changelog's records of an intent: its state while pending,
// its resolution marker, and what happens when either cannot be encoded.

import (
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
	"github.com/switchboard-mcp/switchboard/timeouts"
)

// persist writes p's state to the pending changelog.
func (e *engine) persist(p *pending, t *track) bool {
	p.recordInto(&e.scratch.pi)
	state, err := e.arena.encodeDecoded(e.codec, schemas.EncodingDefault, e.topics.Pending, &e.scratch.pi)
	if err != nil {
		e.encodeFailed(t, err)
		return false
	}
	o := e.arena.output(p.changelog(e.topics.Pending, state))
	p.persisted = true
	e.persists++
	if e.deferStates {
		if p.unsaved == nil {
			e.unsaved = append(e.unsaved, p)
		} else {
			e.unsavedBytes -= outputBytes(p.unsaved)
		}
		p.unsaved = o // a newer state replaces one not written yet
		e.unsavedBytes += outputBytes(o)
		return true
	}
	e.emit(o, t)
	return true
}

// saveStates writes the changelog records that wait for the commit
// (deferStates): the newest state of each intent still pending. One resolved
// since then writes nothing here: its resolution marker, in the same
// transaction, says all a takeover needs, and a transaction commits whole, so
// no reader of the changelog can tell the difference. One dropped (an
// abort, a revocation) is redone or read again by its partition's next owner.
func (e *engine) saveStates() {
	for i, p := range e.unsaved {
		if o := p.unsaved; o != nil {
			p.unsaved = nil
			if e.isPending(p) {
				e.emit(o, nil)
			}
		}
		e.unsaved[i] = nil
	}
	e.unsaved, e.unsavedBytes = e.unsaved[:0], 0
}

// outputBytes is what o weighs in a transaction: its key and value.
func outputBytes(o *port.Output) int64 { return int64(len(o.Key) + len(o.Value)) }

// dropStates forgets the changelog records waiting for the commit: their
// transaction is dropped.
func (e *engine) dropStates() {
	for i, p := range e.unsaved {
		p.unsaved = nil
		e.unsaved[i] = nil
	}
	e.unsaved, e.unsavedBytes = e.unsaved[:0], 0
}

// changelog is p's record (a nil state: its tombstone) in the pending
// changelog: under its changelog key, in the partition of its request, so
// that the intents of every tenant that use one id are all restored with it
// (a scoped key would hash elsewhere).
func (p *pending) changelog(topic string, state []byte) port.Output {
	return port.Output{Topic: topic, Partition: &p.partition, Key: p.logKeyBytes(), Value: state}
}

// logKeyBytes is p's changelog key as the bytes of a record key, made once
// (the id's, keyBytes, when they are the same).
func (p *pending) logKeyBytes() []byte {
	if p.logKeyB == nil {
		if p.logKey == p.id {
			p.logKeyB = p.keyBytes()
		} else {
			p.logKeyB = []byte(p.logKey)
		}
	}
	return p.logKeyB
}

// unpersisted resolves an intent whose agent request or pending state could
// not be encoded rejected (encode_failed), rather than leave it half
// admitted: in a phase its agent's counters do not account for, or pending
// without a timer.
func (e *engine) unpersisted(p *pending, nowMs int64, t *track) {
	p.phase = phaseNone
	e.resolve(p, schemas.OutcomeRejected, nil, &schemas.ErrorInfo{Code: ClassEncode, Message: "the intent could not be encoded for its agent or the pending changelog"}, 0, nowMs, t)
}

// schedule (re)starts p's timer at the next thing due: its retry, its idle
// deadline or its deadline.
func (e *engine) schedule(p *pending) {
	if p.timer != (timeouts.Timer{}) {
		e.wheel.Cancel(p.timer)
	}
	due := p.deadline
	switch {
	case p.phase == phaseRetry:
		due = p.retryAt
	case p.idleAt != 0:
		due = min(due, p.idleAt)
	}
	p.timer = e.wheel.Schedule(due, p)
}

// recordInto fills rec with p's durable form.
func (p *pending) recordInto(rec *schemas.PendingIntent) {
	*rec = schemas.PendingIntent{
		IntentID: p.id, IntentType: p.route.name, Agent: p.agentName(), RecordTs: p.recordTs,
		ReceivedAt: p.receivedAt, DispatchedAt: p.dispatched, Deadline: p.deadline, Attempt: p.attempt,
		CacheKey: p.cacheKey, Payload: p.payload, ContextRef: p.contextRef, SessionID: p.sessionID,
		Tenant: p.tenant, Traceparent: p.traceparent, ContextVersion: p.contextVersion, ContextTs: p.contextTs,
	}
	switch p.phase {
	case phaseQueued:
		rec.Queued = schemas.Ptr(true)
	case phaseRetry:
		rec.RetryAt = schemas.Ptr(p.retryAt)
	case phaseInFlight:
		if p.idleAt != 0 {
			rec.IdleDeadline = schemas.Ptr(p.idleAt)
		}
	}
	p.writeProgress(rec)
}

// resolvedRecord is the changelog's resolution marker for p: what the dedup
// window needs after a takeover (id, type, cache key, tenant, outcome), not
// the payload, context or phase a pending intent needs, so a resolution
// neither encodes nor writes the payload a third time.
// It is built in the engine's scratch record.
func (e *engine) resolvedRecord(p *pending, nowMs int64, outcome schemas.Outcome) *schemas.PendingIntent {
	sc := &e.scratch
	sc.resolvedAt, sc.outcome = nowMs, string(outcome)
	sc.pi = schemas.PendingIntent{
		IntentID: p.id, IntentType: p.route.name, Agent: p.agentName(), RecordTs: p.recordTs,
		ReceivedAt: p.receivedAt, DispatchedAt: p.dispatched, Deadline: p.deadline, Attempt: p.attempt,
		CacheKey: p.cacheKey, SessionID: p.sessionID, Tenant: p.tenant,
		ResolvedAt: &sc.resolvedAt, Outcome: &sc.outcome,
	}
	return &sc.pi
}
