package router

import "github.com/switchboard-mcp/switchboard/schemas"

// Held intents: past their deadline, waiting until this instance has read
// their responses partition up to it (see readProgress), so that an agent
// that answered in time is not reported as timed out.

// readPast reports whether responses partition has been read past tsMs: to
// its end, or up to a record stamped after tsMs. A partition this instance
// has no record of (it owned it from the start and nothing came) counts as
// read.
func (e *engine) readPast(partition int32, tsMs int64) bool {
	rp := e.read[partition]
	return rp == nil || rp.atEnd || rp.maxTs > tsMs || (!rp.takenOver && e.nowMs-rp.lastReadAt >= quietMs)
}

func (e *engine) hold(p *pending, nowMs int64) {
	p.heldSince = nowMs
	e.held[p.partition] = append(e.held[p.partition], p)
}

// readResponse notes that a response stamped tsMs was read from a partition,
// and times out the held intents whose deadline it shows passed unanswered.
func (e *engine) readResponse(partition int32, tsMs, nowMs int64) {
	rp := e.read[partition]
	if rp == nil {
		rp = &readProgress{}
		e.read[partition] = rp
	}
	rp.atEnd = false
	rp.maxTs = max(rp.maxTs, tsMs)
	rp.lastReadAt = nowMs
	if len(e.held[partition]) > 0 {
		e.releaseHeld(partition, func(p *pending) bool { return p.deadline < tsMs }, nowMs)
	}
}

// readToEnd notes that a responses partition has been read to its end: every
// held intent of it times out.
func (e *engine) readToEnd(partition int32, nowMs int64) {
	rp := e.read[partition]
	if rp == nil {
		rp = &readProgress{}
		e.read[partition] = rp
	}
	rp.atEnd = true
	rp.takenOver = false
	if len(e.held[partition]) > 0 {
		e.releaseHeld(partition, func(*pending) bool { return true }, nowMs)
	}
}

// takingOver notes that a partition was just assigned: its responses have not
// been read at all yet.
func (e *engine) takingOver(partition int32) {
	e.read[partition] = &readProgress{takenOver: true}
}

func (e *engine) releaseHeld(partition int32, due func(*pending) bool, nowMs int64) {
	keep := e.held[partition][:0]
	for _, p := range e.held[partition] {
		if !e.isPending(p) {
			continue // answered meanwhile
		}
		if !due(p) {
			keep = append(keep, p)
			continue
		}
		p.heldSince = 0
		e.timeOut(p, nowMs, schemas.ReasonDeadline, nil)
	}
	clear(e.held[partition][len(keep):])
	e.held[partition] = keep
}
