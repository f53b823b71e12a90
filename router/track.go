package router

import "github.com/switchboard-mcp/switchboard/router/port"

// Offset tracking for at_least_once. Each consumed record gets a track; every
// output it causes, and every hold (a request waiting for its intent to
// resolve), counts against it. When a track's count reaches zero the record is
// done. A partition's offset advances over the contiguous prefix of done
// records, and only then is it stored for commit: by flush, once per wake-up
// of the event loop for every partition that advanced, not once per record
// (a StoreOffsets is a cgo call of a microsecond or two; at 8,000 intents/s
// the loop made 16,000 of them a second, one per request and response).

type track struct {
	part      *partitionTrack
	offset    int64
	remaining int32
	failed    bool // an output it caused could not be delivered
	done      bool
	// parents: a joint track (no partition of its own) stands for these
	// records; once it is done it releases each of them once (newJoint).
	parents []*track
}

// newJoint returns a track for outputs caused by several records at once
// (an intent's deferred pending state, caused by its request and by what
// changed it since; its resolution before that state was written). The
// caller has taken one hold on each parent, which the joint now owns, and
// holds the joint once itself until it has emitted the outputs.
func newJoint(parents []*track) *track { return &track{remaining: 1, parents: parents} }

// hold adds one thing the record is waiting for.
func (t *track) hold() {
	if t != nil {
		t.remaining++
	}
}

type partitionTrack struct {
	tp      port.TopicPartition
	queue   []*track // in offset order; queue[head:] are live
	head    int
	stored  int64 // the last offset stored (or due to be, dirty), -1 before any
	revoked bool
	dirty   bool // stored advanced since the last flush
}

type tracker struct {
	parts map[port.TopicPartition]*partitionTrack
	store func(tp port.TopicPartition, next int64)
	dirty []*partitionTrack // the partitions whose offset flush stores
}

func newTracker(store func(port.TopicPartition, int64)) *tracker {
	return &tracker{parts: map[port.TopicPartition]*partitionTrack{}, store: store}
}

// begin starts tracking a record. The caller holds it (remaining = 1) until
// it calls release after handing the record to the engine.
func (tr *tracker) begin(tp port.TopicPartition, offset int64) *track {
	p := tr.parts[tp]
	if p == nil {
		p = &partitionTrack{tp: tp, stored: -1}
		tr.parts[tp] = p
	}
	t := &track{part: p, offset: offset, remaining: 1}
	p.queue = append(p.queue, t)
	return t
}

// release drops one hold or delivery from a track and advances its partition
// when the track is done.
func (tr *tracker) release(t *track) {
	if t == nil || t.done {
		return
	}
	t.remaining--
	if t.remaining > 0 {
		return
	}
	t.done = true
	if t.parents != nil {
		for _, parent := range t.parents {
			if t.failed {
				tr.fail(parent)
			}
			tr.release(parent)
		}
		return
	}
	p := t.part
	if p.revoked {
		return
	}
	next := int64(-1)
	for p.head < len(p.queue) {
		h := p.queue[p.head]
		if !h.done || h.failed {
			break
		}
		next = h.offset + 1
		p.queue[p.head] = nil
		p.head++
	}
	if p.head > 1024 && p.head*2 > len(p.queue) {
		n := copy(p.queue, p.queue[p.head:])
		clear(p.queue[n:])
		p.queue = p.queue[:n]
		p.head = 0
	}
	if next > p.stored {
		p.stored = next
		if !p.dirty {
			p.dirty = true
			tr.dirty = append(tr.dirty, p)
		}
	}
}

// flush stores the offset of every partition that advanced since the last
// flush (revoked ones too: revoke flushes before it forgets).
func (tr *tracker) flush() {
	for i, p := range tr.dirty {
		p.dirty = false
		tr.store(p.tp, p.stored)
		tr.dirty[i] = nil
	}
	tr.dirty = tr.dirty[:0]
}

// fail marks a track as not deliverable: its partition's offset never
// advances past it, so a restart replays it.
func (tr *tracker) fail(t *track) {
	if t != nil {
		t.failed = true
	}
}

// revoke forgets a partition; late acknowledgements for it are ignored.
// The caller flushes first: what advanced is stored while the partition is
// still assigned.
func (tr *tracker) revoke(tp port.TopicPartition) {
	if p := tr.parts[tp]; p != nil {
		p.revoked = true
		delete(tr.parts, tp)
	}
}

// lag is the number of records tracked but not yet committable.
func (tr *tracker) lag() int {
	n := 0
	for _, p := range tr.parts {
		n += len(p.queue) - p.head
	}
	return n
}
