package router

import (
	"time"

	"github.com/switchboard-mcp/switchboard/router/port"
)

// delivery is what differs between the two delivery guarantees: how the
// outputs a record causes reach Kafka, how its offset is committed, and
// what a tick, a revocation and the stop do about them. New chooses one
// implementation from router.delivery: exactlyOnce (exactlyonce.go, Kafka
// transactions) or atLeastOnce (atleastonce.go, offsets stored once the
// broker has acknowledged what their records caused). The Router keeps the
// lifecycle, the event loop, ownership and takeover, and calls these hooks
// from the event loop only.
type delivery interface {
	// discarding reports whether records are being dropped because they
	// were read before a rewind (exactly_once, after an abort): they will be
	// read again.
	discarding() bool
	// begin starts a record of an owned partition, before the engine handles
	// it, and returns the track its outputs count against (nil: none).
	begin(tp port.TopicPartition, offset int64) *track
	// handled ends a record the engine has handled and flushed.
	handled(t *track)
	// produce hands an output caused by the record of t (nil: by no record)
	// to Kafka. It is the engine's emit.
	produce(o *port.Output, t *track)
	// dispatch hands an output bound for an agent's topic (an intent's
	// request, its retries, a cancel notice) to Kafka. exactly_once sends
	// it at once, outside the transaction, and commits no transaction
	// before the broker has acknowledged it; at_least_once as produce.
	dispatch(o *port.Output, t *track)
	// ack takes the Sink's report of one output's delivery.
	ack(a port.Ack)
	// commitTicks returns what paces commits besides the loop's tick (nil:
	// nothing) and what stops it.
	commitTicks() (<-chan time.Time, func())
	// commit commits the work done so far, if the guarantee commits itself.
	commit()
	// tick runs on every wheel tick, after the engine's.
	tick(nowMs int64)
	// groupCommit runs after every wake-up of the loop, once whatever was
	// queued has been handled.
	groupCommit()
	// settle runs after every event: it deals with a failure during the
	// event once the event's work is done.
	settle()
	// restored runs before the loop takes over partitions the poll goroutine
	// read (ev.rewind: after an abort, every partition it owns).
	restored(ev *restored)
	// revoke runs before the loop forgets partitions taken away (lost: by a
	// group that has already moved on, so nothing may be committed for them).
	revoke(tps []port.TopicPartition, lost bool)
	// finish runs once the loop has stopped and the poll goroutine is gone,
	// before the Source and the Sink close.
	finish()
}
