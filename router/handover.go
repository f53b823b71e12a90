package router

import "time"

// handoverWait bounds how long a planned revocation (a member joins or
// leaves the group: a scale-out, a rolling deploy) waits for the outputs in
// flight under at_least_once, as the agent runner's GroupReader bounds its
// commit at a revocation (kafkaio's revokeCommitWait). The group's other
// members wait for this one meanwhile. Past it the partitions go as before:
// their next owner reads again what the outputs still in flight were for.
const handoverWait = 5 * time.Second

// handOver waits, at most handoverWait on the router's clock, until the
// broker has acknowledged every output in flight, taking the
// acknowledgements as the loop does (an acknowledged result sends its
// resolution marker, which is waited for too), so that the records they
// complete have their offsets stored before the partitions go. Without it
// the partitions' next owner read those records again: a response whose
// result was in flight paired a second time, and a timer's intent timed out
// again, a second result and timeout event at every rebalance under load.
//
// It waits for every output in flight, not only those of the revoked
// partitions: a timer's outputs count against no record, so they cannot be
// told apart, and the loop produces nothing else while it waits (the poll
// goroutine is in the revoke hook), so this is the same round trip or two.
// Records and ticks wait meanwhile, as they wait for an exactly_once commit.
func (d *atLeastOnce) handOver(partitions int) {
	if d.inflight == 0 {
		return
	}
	clock := d.r.opts.clock
	start, outstanding := clock.Now(), d.inflight
	deadline := clock.NewTimer(handoverWait)
	defer deadline.Stop()
	acks := d.r.sink.Acks()
	for d.inflight > 0 {
		select {
		case a := <-acks:
			d.ack(a)
		case <-deadline.Chan():
			d.r.opts.log.Warn("partitions revoked before the broker acknowledged every output: their next owner reads those records again",
				"partitions", partitions, "outstanding", d.inflight, "waited", handoverWait)
			return
		}
	}
	d.r.opts.log.Debug("outputs in flight acknowledged before the revocation", "partitions", partitions, "outputs", outstanding, "waited_ms", clock.Since(start).Milliseconds())
}
