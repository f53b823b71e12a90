package router

import (
	"fmt"
	"time"

	"github.com/switchboard-mcp/switchboard/router/port"
)

// atLeastOnce is the at_least_once delivery: a record's offset is stored for
// the consumer's automatic commit (Source.StoreOffset) once every output it
// caused has been acknowledged by the broker (the tracker, track.go), at the
// end of the loop's wake-up that saw the last acknowledgement. It
// commits nothing itself, so a failure drops nothing: an output that could
// not be delivered keeps its record's offset from advancing, and a restart
// reads the record again.
type atLeastOnce struct {
	r        *Router
	tr       *tracker
	inflight int // outputs not yet acknowledged
}

var _ delivery = (*atLeastOnce)(nil)

// An intent's pending state waits commit_interval before it is written
// (engine.deferred, ageStates at the tick), holding the records that
// caused it: one resolved meanwhile writes only its result and resolution
// marker, which carry those holds instead.
func newAtLeastOnce(r *Router) *atLeastOnce {
	d := &atLeastOnce{r: r}
	d.tr = newTracker(d.storeOffset)
	r.engine.deferred.on, r.engine.deferred.release, r.engine.deferred.after = true, d.tr.release, d.after
	return d
}

func (*atLeastOnce) discarding() bool { return false }

func (d *atLeastOnce) begin(tp port.TopicPartition, offset int64) *track {
	return d.tr.begin(tp, offset)
}

// handled releases the hold begin took: the record is done once its outputs
// are acknowledged.
func (d *atLeastOnce) handled(t *track) { d.tr.release(t) }

// produce hands o to the Sink; t, if not nil, waits for its acknowledgement.
// o is its own delivery opaque, so a produce allocates nothing more. o.Then
// follows once o is acknowledged (ack).
func (d *atLeastOnce) produce(o *port.Output, t *track) {
	t.hold()
	o.Cause = t
	d.inflight++
	if err := d.r.sink.Produce(o, o); err != nil {
		d.ack(port.Ack{Opaque: o, Err: err})
	}
}

// dispatch is produce: every output waits for its acknowledgement alike.
func (d *atLeastOnce) dispatch(o *port.Output, t *track) { d.produce(o, t) }

func (d *atLeastOnce) ack(a port.Ack) {
	o, ok := a.Opaque.(*port.Output)
	if !ok {
		if a.Err != nil {
			d.r.m.deliveryFailed.Inc()
		}
		return
	}
	t, _ := o.Cause.(*track)
	d.inflight--
	if a.Err != nil {
		d.r.m.deliveryFailed.Inc()
		d.tr.fail(t)
		d.r.fail(fmt.Errorf("router: delivery to %s failed: %w", o.Topic, a.Err))
		// Not acknowledged: a state chained on o (after) is never written,
		// so no takeover restores an intent whose dispatch failed as in flight.
		d.tr.release(t)
		return
	}
	o.Cause = acknowledged{}
	if next := o.Then; next != nil {
		// What waited for o goes now: a resolution marker for its result,
		// before o's hold on t is released (t's offset waits for it too),
		// or an intent's state for its dispatch, with its own track (after).
		o.Then = nil
		nt := t
		if own, ok := next.Cause.(*track); ok {
			nt = own
		}
		d.produce(next, nt)
		if nt != t {
			d.tr.release(nt) // after's hold
		}
	}
	d.tr.release(t)
}

// acknowledged is the Cause of an output once the broker has acknowledged
// it: after then produces at once.
type acknowledged struct{}

// after chains o, waited for by t, to be produced once the broker has
// acknowledged first, and reports true; it reports false, and does
// nothing, when first is acknowledged already (the caller produces o
// itself). An intent's state after its dispatch (engine.save); first is a
// dispatch, which has no Then of its own but a state chained before
// (engine.unchain takes it off first).
func (d *atLeastOnce) after(first, o *port.Output, t *track) bool {
	if _, ok := first.Cause.(acknowledged); ok {
		return false
	}
	t.hold()
	o.Cause = t
	first.Then = o
	return true
}

func (*atLeastOnce) commitTicks() (<-chan time.Time, func()) { return nil, func() {} }

// commit has nothing to do: the consumer commits the stored offsets.
func (*atLeastOnce) commit() {}

func (d *atLeastOnce) tick(nowMs int64) {
	d.r.engine.ageStates(nowMs, d.r.cfg.Router.CommitInterval.D().Milliseconds())
	d.r.m.uncommitted.Set(float64(d.tr.lag()))
}

// groupCommit stores the offsets that advanced during the wake-up, one
// StoreOffset per partition rather than one per record.
func (d *atLeastOnce) groupCommit() { d.tr.flush() }

func (*atLeastOnce) settle()            {}
func (*atLeastOnce) restored(*restored) {}

// revoke forgets the partitions' tracks: late acknowledgements for them are
// ignored, and their next owner reads on from the offsets stored so far. A
// planned revocation (not lost) first writes the waiting states of the
// partitions' pending intents (saveStatesOf), then waits, boundedly, for
// the outputs in flight (handOver, handover.go), so that what they complete
// is stored; a lost one does neither: another member may own the
// partitions already.
func (d *atLeastOnce) revoke(tps []port.TopicPartition, lost bool) {
	if !lost {
		d.r.engine.saveStatesOf(tps)
		d.handOver(len(tps))
	}
	d.tr.flush() // while the partitions are still this consumer's
	for _, tp := range tps {
		d.tr.revoke(tp)
	}
}

// finish waits, up to the drain timeout, for the broker to acknowledge the
// outputs in flight, so that their records' offsets are stored before the
// Source commits and closes.
func (d *atLeastOnce) finish() {
	defer d.tr.flush()
	d.r.engine.saveStates()
	if d.inflight == 0 {
		return
	}
	deadline := d.r.opts.clock.After(d.r.opts.drainTimeout)
	acks := d.r.sink.Acks()
	for d.inflight > 0 {
		select {
		case a := <-acks:
			d.ack(a)
		case <-deadline:
			d.r.opts.log.Warn("stopped before the broker acknowledged every output; their records stay uncommitted", "outstanding", d.inflight)
			return
		}
	}
}

func (d *atLeastOnce) storeOffset(tp port.TopicPartition, next int64) {
	if err := d.r.src.StoreOffset(tp, next); err != nil {
		d.r.opts.log.Debug("storing an offset", "topic", tp.Topic, "partition", tp.Partition, "offset", next, "error", err)
	}
}
