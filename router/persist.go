package router

// The pending changelog's records of an intent: its state while pending,
// its resolution marker, and what happens when either cannot be encoded.

import (
	"math"

	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
	"github.com/switchboard-mcp/switchboard/timeouts"
)

// persist writes p's state to the pending changelog (deferred: at the
// tick commit_interval after nowMs, unless it resolves first).
func (e *engine) persist(p *pending, nowMs int64, t *track) bool {
	p.recordInto(&e.scratch.pi)
	state, err := e.arena.encodeDecoded(e.codec, schemas.EncodingDefault, e.topics.Pending, &e.scratch.pi)
	if err != nil {
		e.encodeFailed(t, err)
		return false
	}
	o := e.arena.output(p.changelog(e.topics.Pending, state))
	p.persisted = true
	if e.deferred.on {
		if p.unsaved == nil {
			p.unsavedAt = nowMs
			e.deferred.queue = append(e.deferred.queue, p)
		}
		p.unsaved = o // a newer state replaces one not written yet
		if t != nil { // t's offset waits for the state's write, or for the resolution
			t.hold()
			p.holds = append(p.holds, t)
		}
		return true
	}
	e.emit(o, t)
	return true
}

// deferredStates: under at_least_once (on) an intent's changelog record
// waits commit_interval instead of going out at once, so that an intent
// resolved meanwhile writes only its resolution marker. queue holds the
// intents whose state waits, in the order their first unwritten state was
// made; release drops a hold on a track (the tracker's); after produces an
// output once another one is acknowledged (atLeastOnce.after), or says
// that one is already.
type deferredStates struct {
	on      bool
	queue   []*pending
	release func(*track)
	after   func(first, o *port.Output, t *track) bool
}

// saveStates writes every pending-changelog record that waits
// (deferred): the newest state of each intent still pending. An intent
// resolved meanwhile writes nothing here: its resolution marker says all a
// takeover needs, and it went out with the holds of the records its state
// was caused by (joinHolds), so no record's offset is stored before either
// is written. One dropped (its partition revoked) is read again by the
// partition's next owner.
func (e *engine) saveStates() { e.ageStates(math.MaxInt64, 0) }

// saveStatesOf writes the waiting states of the intents of the requests
// partitions in tps (a planned revocation: they are about to go). Without
// it such an intent's request offset, held for its state, was never
// stored: the partition's next owner read the request again and dispatched
// it a second time, so the agent did the work twice. With its state
// written, the next owner restores the intent as pending and waits for the
// answer to the first dispatch. The queue keeps the saved entries: ageStates
// passes over an intent without an unwritten state.
func (e *engine) saveStatesOf(tps []port.TopicPartition) {
	going := map[int32]bool{}
	for _, tp := range tps {
		if tp.Topic == e.topics.Requests {
			going[tp.Partition] = true
		}
	}
	for _, p := range e.deferred.queue {
		if p != nil && going[p.partition] {
			e.save(p)
		}
	}
}

// ageStates writes the records that have waited waitMs by nowMs (at the
// tick, commit_interval): the queue is in the order the intents' first
// unwritten state was made, so it stops at the first that has not.
func (e *engine) ageStates(nowMs, waitMs int64) {
	i := 0
	for ; i < len(e.deferred.queue); i++ {
		p := e.deferred.queue[i]
		if p.unsaved != nil && p.unsavedAt > nowMs-waitMs {
			break
		}
		e.deferred.queue[i] = nil
		e.save(p)
	}
	if i == len(e.deferred.queue) {
		e.deferred.queue = e.deferred.queue[:0]
		return
	}
	if i > 0 && i*2 >= len(e.deferred.queue) { // keep the queue's backing array from growing for ever
		n := copy(e.deferred.queue, e.deferred.queue[i:])
		clear(e.deferred.queue[n:])
		e.deferred.queue = e.deferred.queue[:n]
	} else if i > 0 {
		e.deferred.queue = e.deferred.queue[i:]
	}
}

// save writes p's waiting state, if it still has one (a resolution since
// took its holds and wrote its marker instead).
//
// A state that says p was dispatched goes out only once that dispatch is
// acknowledged (deferred.after). Written before it, a crash that lost the
// dispatch (still in the producer's queue) left a state saying in flight:
// the next owner restored p as dispatched, took its request, read again,
// for a duplicate, and waited for an answer to a dispatch no agent ever
// saw, until p fell back at its deadline. A dispatch made when a queue
// moved or a retry fell due counts against no record, so nothing else
// ordered the two; one made for its request did only when acknowledged
// within commit_interval. A state still waiting there is superseded
// (unchain) by p's next state, its next dispatch or its resolution.
func (e *engine) save(p *pending) {
	o := p.unsaved
	if o == nil {
		return
	}
	p.unsaved = nil
	e.unchain(p)
	if !e.isPending(p) { // dropped: its partition went, and its holds with it
		e.dropHolds(p)
		return
	}
	cause := e.joinHolds(p, nil)
	if p.sent == nil || !e.deferred.after(p.sent, o, cause) {
		p.sent = nil // acknowledged: nothing more waits for it
		e.emit(o, cause)
	}
	e.unhold(cause, nil)
}

// unchain takes p's state off its dispatch when it still waits there for
// the acknowledgement (deferred.after): something newer of p replaces it.
// The records it held join p's holds, so that what replaces it carries
// them. Left there, it would be written when the dispatch is acknowledged,
// which can be after p's resolution marker: the changelog's newest record
// of p a state again, which the next owner restored, and p resolved twice
// (TestPlannedRebalanceMakesNoDuplicateApacheKafka, producers lingering
// 300 ms).
func (e *engine) unchain(p *pending) {
	if p.sent == nil || p.sent.Then == nil {
		return
	}
	state := p.sent.Then
	p.sent.Then = nil
	if t, _ := state.Cause.(*track); t != nil {
		p.holds = append(p.holds, t)
	}
}

// resolving is joinHolds for p's resolution: a state of p not written yet
// never will be (the resolution marker says what a takeover needs), and is
// counted skipped.
func (e *engine) resolving(p *pending, cause *track) *track {
	if p.unsaved != nil {
		p.unsaved = nil
		e.m.statesSkipped.Inc()
	}
	e.unchain(p)
	p.sent = nil
	return e.joinHolds(p, cause)
}

// joinHolds returns the track that the outputs p is about to write count
// against: cause, or, when p holds records for a state not written yet, a
// joint track of those and cause, so that no record's offset is stored
// before those outputs are acknowledged. The caller ends with unhold.
func (e *engine) joinHolds(p *pending, cause *track) *track {
	if len(p.holds) == 0 {
		return cause
	}
	parents := p.holds
	p.holds = nil
	if cause != nil {
		cause.hold()
		parents = append(parents, cause)
	}
	return newJoint(parents)
}

// unhold drops joinHolds' own hold on the joint track it returned.
func (e *engine) unhold(joint, cause *track) {
	if joint != cause {
		e.deferred.release(joint)
	}
}

// dropHolds releases what p holds for a state it will never write.
func (e *engine) dropHolds(p *pending) {
	for _, t := range p.holds {
		e.deferred.release(t)
	}
	p.holds = nil
}

// changelog is p's record (a nil state: its tombstone) in the pending
// changelog: under its changelog key, in the partition of its request, so
// that the intents of every tenant that use one id are all restored with it
// (a scoped key would hash elsewhere).
func (p *pending) changelog(topic string, state []byte) port.Output {
	return port.Output{Topic: topic, Partition: &p.partition, Key: p.logKeyBytes(), Value: state}
}

// keyBytes is p's id as a record key. Its outputs share it (a sink copies
// or keeps it, never changes it), so an intent's four or five outputs cost
// one conversion.
func (p *pending) keyBytes() []byte {
	if p.idKey == nil {
		p.idKey = []byte(p.id)
	}
	return p.idKey
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
