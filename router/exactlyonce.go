package router

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-mcp/switchboard/router/port"
)

// exactlyOnce is the exactly_once delivery: outputs and the offsets of the
// records that caused them go into Kafka transactions through a TxSink
// (group commit, opening, committing and dropping transactions). A failed
// transaction drops the work since the last commit and rewinds the poll
// goroutine to the committed offsets. See delivery in docs/ARCHITECTURE.md.
//
// Dispatches (what goes to an agent's topic) are the exception: they go out
// at once, outside the transaction (TxSink.ProduceAtOnce), so that the agent
// reads them without waiting for the commit and its markers. The promise is
// about results (one per intent), which stay transactional; an agent may
// see an intent twice anyway (at_least_once, its own restarts). What keeps
// a committed intent from having lost its dispatch: no transaction commits
// before every dispatch sent since the last commit is acknowledged, and a
// failed one fails the transaction (abort, redo from the last commit, which
// dispatches again). A dispatch of work that is then dropped (an abort, a
// crash before the commit, a fenced zombie) has reached the agent anyway: a
// duplicate, whose answer pairs with the redone intent or is ignored.
type exactlyOnce struct {
	r          *Router
	tx         port.TxSink
	positions  map[port.TopicPartition]int64 // next offset to read, per owned partition
	txOpen     bool                          // a transaction holds outputs
	txBytes    int64                         // the bytes of the open transaction's outputs
	dirty      bool                          // positions moved since the last commit
	lastCommit int64
	txOpenedMs int64 // when the open transaction was opened (router clock)
	// urgent: the open transaction holds an output a reader waits for
	// (anything but pending-changelog records): group commit commits it
	// at once. Pending-state records alone wait up to commit_interval, so
	// that an answer arriving meanwhile resolves its intent in the same
	// transaction, and the loop is not blocked in a commit when it does.
	urgent bool
	// What the open transaction holds, for the batch-size histograms:
	// records consumed and outputs produced since the last commit.
	txRecords, txOutputs int
	dropping             bool // after an abort, until the poll goroutine has rewound
	// needDrop: a transaction failed during the current event; its work (and
	// whatever the event did after the failure) is dropped once the event is
	// handled (see settle). dropFatal: the failure needs a new producer.
	needDrop, dropFatal bool
	// sent counts the dispatches sent at once in this generation that the
	// broker has not acknowledged yet; dropWork starts a new generation.
	sent *atOnce
}

// atOnce is one generation of dispatches sent at once: the work since the
// last commit, until it commits or is dropped. It is those dispatches'
// delivery opaque, so an acknowledgement of a dropped generation's dispatch
// (sent before an abort) is told apart and changes nothing.
type atOnce struct{ unacked int }

// dispatchTimeout bounds a commit's wait for the acknowledgements of the
// dispatches sent at once: past it the transaction fails and is redone.
const dispatchTimeout = 15 * time.Second

var _ delivery = (*exactlyOnce)(nil)

// newExactlyOnce builds the delivery over tx. The dedup window keeps what it
// adds until a commit, so that an abort can forget it.
func newExactlyOnce(r *Router, tx port.TxSink) *exactlyOnce {
	r.engine.resolved.undo = true
	return &exactlyOnce{r: r, tx: tx, positions: map[port.TopicPartition]int64{}, sent: &atOnce{}}
}

func (d *exactlyOnce) discarding() bool { return d.dropping }

// begin moves the record's partition past it: the next commit sends that
// position with the transaction. Outputs count against nothing.
func (d *exactlyOnce) begin(tp port.TopicPartition, offset int64) *track {
	d.positions[tp] = offset + 1
	d.dirty = true
	d.txRecords++
	return nil
}

// handled commits after the record at hand once the open transaction holds
// maxTxBytes of outputs, rather than at the next wake-up.
func (d *exactlyOnce) handled(*track) {
	if d.txBytes >= maxTxBytes {
		d.commit()
	}
}

// produce hands o to the open transaction, opening one if none is.
func (d *exactlyOnce) produce(o *port.Output, _ *track) {
	if d.dropping {
		return // the transaction failed: this work is redone after the rewind
	}
	if !d.txOpen {
		if err := d.open(); err != nil {
			d.txFailed(err)
			return
		}
	}
	if err := d.tx.Produce(o, nil); err != nil {
		d.txFailed(err)
	}
	if o.Topic != d.r.cfg.Topics.Pending {
		d.urgent = true
	}
	d.txBytes += int64(len(o.Key) + len(o.Value))
	d.txOutputs++
}

// dispatch sends o at once, outside the transaction (see exactlyOnce). Its
// bytes count towards maxTxBytes: a commit waits for them too.
func (d *exactlyOnce) dispatch(o *port.Output, _ *track) {
	if d.dropping {
		return // the transaction failed: this work is redone after the rewind
	}
	if err := d.tx.ProduceAtOnce(o, d.sent); err != nil {
		d.txFailed(err)
		return
	}
	d.sent.unacked++
	d.txBytes += int64(len(o.Key) + len(o.Value))
}

// ack takes the acknowledgement of a dispatch sent at once: a failed one of
// the current generation fails the transaction, which is then redone (the
// loop settles after an ack). Other failures are counted only: a failed
// transactional output fails its commit.
func (d *exactlyOnce) ack(a port.Ack) {
	s, ok := a.Opaque.(*atOnce)
	if ok {
		s.unacked--
	}
	if a.Err == nil {
		return
	}
	d.r.m.deliveryFailed.Inc()
	if ok && s == d.sent && !d.dropping {
		d.txFailed(fmt.Errorf("router: a dispatch sent at once was not delivered: %w", a.Err))
	}
}

// awaitDispatches waits until the broker has acknowledged every dispatch
// sent at once in this generation, so that no transaction commits an
// intent whose dispatch is lost. It reports false when the transaction
// failed meanwhile (a dispatch failed, or none came back in
// dispatchTimeout, on the commit clock).
func (d *exactlyOnce) awaitDispatches() bool {
	if d.sent.unacked > 0 && !d.needDrop {
		clock := d.r.opts.clock
		if d.r.opts.commitClock != nil {
			clock = d.r.opts.commitClock
		}
		start := clock.Now()
		timer := clock.NewTimer(dispatchTimeout)
		acks := d.tx.Acks()
		for d.sent.unacked > 0 && !d.needDrop {
			select {
			case a := <-acks:
				d.ack(a)
			case <-timer.Chan():
				d.txFailed(fmt.Errorf("router: %d dispatches sent at once not acknowledged within %v", d.sent.unacked, dispatchTimeout))
			}
		}
		timer.Stop()
		d.r.m.dispatchWait.Observe(clock.Since(start).Seconds())
	}
	return !d.needDrop
}

// commitTicks: with WithCommitClock, commits are paced by that clock rather
// than by the wheel's tick.
func (d *exactlyOnce) commitTicks() (<-chan time.Time, func()) {
	if d.r.opts.commitClock == nil {
		return nil, func() {}
	}
	t := d.r.opts.commitClock.NewTicker(d.r.cfg.Router.CommitInterval.D())
	return t.Chan(), t.Stop
}

// tick commits when commit_interval has passed since the open transaction
// was opened, or, with none open, since the last commit (and no commit
// clock paces commits).
func (d *exactlyOnce) tick(nowMs int64) {
	if d.r.opts.commitClock != nil {
		return
	}
	since := d.lastCommit
	if d.txOpen {
		since = d.txOpenedMs
	}
	if nowMs-since >= d.r.cfg.Router.CommitInterval.D().Milliseconds() {
		d.commit()
	}
}

// restored ends the discarding after a rewind, and takes the committed
// offsets of the partitions taken over as their positions.
func (d *exactlyOnce) restored(ev *restored) {
	if ev.rewind {
		d.dropping = false
	}
	for _, tp := range ev.tps {
		if off, ok := ev.committed[tp]; ok {
			d.positions[tp] = off
		}
	}
}

// revoke commits the work on the partitions before they go, or, when they
// are lost, drops it: another member may own them already.
func (d *exactlyOnce) revoke(tps []port.TopicPartition, lost bool) {
	if lost {
		d.abandon("partitions lost")
	} else {
		d.commit()
	}
	for _, tp := range tps {
		delete(d.positions, tp)
	}
}

// finish commits the last transaction, unless it failed.
func (d *exactlyOnce) finish() {
	if !d.dropping {
		d.commit()
	}
}

// groupCommit commits the open transaction (exactly_once) as soon as it
// holds an output a reader waits for: a result, a timeout event, progress,
// a dead letter, a moved record. The loop is the only committer and a
// commit blocks it, so one commit is in flight at a time; what arrives
// meanwhile queues up and goes into the next transaction, taken whole by
// the next wake-up. Batches thus grow with the load, and an idle router
// commits each such event at once instead of waiting for a commit_interval
// tick. A transaction that holds only pending-state records (an intent
// dispatched at once: nobody reads its changelog record but a takeover)
// or only moved positions (records that caused nothing) waits for
// commit_interval, which bounds how long any work stays uncommitted: the
// loop stays free to pair the answer, which then commits with its
// intent's pending state in one transaction.
func (d *exactlyOnce) groupCommit() {
	if d.txOpen && d.urgent && !d.dropping {
		d.commit()
	}
}

// open opens a transaction for outputs and, when the sink can, registers it
// with its coordinator before the first output (see TxRegistrar).
func (d *exactlyOnce) open() error {
	if err := d.tx.Begin(); err != nil {
		return err
	}
	d.txOpen, d.txOpenedMs = true, d.r.opts.clock.Now().UnixMilli()
	reg, ok := d.tx.(port.TxRegistrar)
	if !ok {
		return nil
	}
	offsets := d.ownedOffsets()
	if len(offsets) == 0 {
		return nil
	}
	group, err := d.r.src.GroupMetadata()
	if err != nil {
		return &port.TxnError{Err: err, Abortable: true}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return reg.Register(ctx, offsets, group)
}

// ownedOffsets are the positions of the partitions this instance owns.
func (d *exactlyOnce) ownedOffsets() map[port.TopicPartition]int64 {
	offsets := make(map[port.TopicPartition]int64, len(d.positions))
	for tp, off := range d.positions {
		if d.r.assigned[tp] {
			offsets[tp] = off
		}
	}
	return offsets
}

// commit commits the open transaction with the positions of every owned
// partition (exactly_once). Sending offsets in every transaction, even one
// that only holds a timer's outputs, is what fences a zombie instance: its
// commit fails once the group has moved on. The offsets go to the
// transaction while the dispatches sent at once are being acknowledged;
// only its end (CommitTransaction) waits for those acknowledgements.
func (d *exactlyOnce) commit() {
	defer d.settle()
	now := d.r.opts.clock.Now()
	d.lastCommit = now.UnixMilli()
	if d.dropping {
		return // the last transaction aborted: nothing is open until the rewind
	}
	if !d.txOpen && !d.dirty {
		return
	}
	if d.assignmentLost() {
		return
	}
	if offsets := d.ownedOffsets(); d.txOpen || len(offsets) > 0 {
		if !d.sendOffsets(offsets) {
			return // the deferred settle drops the work
		}
	}
	if !d.awaitDispatches() {
		return // the deferred settle drops the work
	}
	if !d.txOpen {
		d.dirty = false // nothing owned: no offsets to commit
		return
	}
	if d.assignmentLost() {
		return
	}
	// Bounded: the loop waits here, and a commit that cannot finish in this
	// time is better aborted and redone.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := retried(ctx, func() error { return d.tx.Commit(ctx) }); err != nil {
		d.txFailed(err)
		return
	}
	d.txOpen, d.dirty, d.txBytes, d.urgent = false, false, 0, false
	d.r.engine.resolved.commit()
	d.r.m.committed.Inc()
	d.r.m.commitSeconds.Observe(d.r.opts.clock.Since(now).Seconds())
	d.r.m.txRecords.Observe(float64(d.txRecords))
	d.r.m.txOutputs.Observe(float64(d.txOutputs))
	d.txRecords, d.txOutputs = 0, 0
}

// assignmentLost drops the work when the group has moved on without this
// member (session timeout, fencing): a commit now might not be fenced, and
// another member may already be redoing this work. The revocation follows.
func (d *exactlyOnce) assignmentLost() bool {
	if !d.r.src.AssignmentLost() {
		return false
	}
	d.abandon("assignment lost")
	return true
}

// sendOffsets sends offsets to the open transaction, opening one if none
// is (moved positions alone are committed too). It reports false when the
// transaction failed.
func (d *exactlyOnce) sendOffsets(offsets map[port.TopicPartition]int64) bool {
	if !d.txOpen {
		if err := d.tx.Begin(); err != nil {
			d.txFailed(err)
			return false
		}
		d.txOpen = true
	}
	group, err := d.r.src.GroupMetadata()
	if err != nil {
		d.txFailed(&port.TxnError{Err: err, Abortable: true})
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := retried(ctx, func() error { return d.tx.SendOffsets(ctx, offsets, group) }); err != nil {
		d.txFailed(err)
		return false
	}
	return true
}

// retried runs a transaction step until it succeeds, fails for good (not a
// retriable TxnError), has been tried five times or ctx is done.
func retried(ctx context.Context, step func() error) error {
	for try := 1; ; try++ {
		err := step()
		var te *port.TxnError
		if err == nil || !errors.As(err, &te) || !te.Retriable || try == 5 || ctx.Err() != nil {
			return err
		}
	}
}

// txFailed marks the open transaction failed: nothing more is produced, and
// once the current event is handled settle aborts it (or, after a
// fatal error, replaces the producer) and redoes the work from the last
// committed state. Dropping at once would let the rest of the event add state
// (pending intents, resolutions) that outlives the abort.
func (d *exactlyOnce) txFailed(err error) {
	d.r.opts.log.Warn("transaction failed: redoing its work from the last commit", "error", err)
	var te *port.TxnError
	d.dropFatal = d.dropFatal || (errors.As(err, &te) && te.Fatal)
	d.needDrop, d.dropping = true, true
}

// settle, after an event in which a transaction failed, drops the
// work since the last commit (every owned partition is forgotten) and asks
// the poll goroutine to rewind to the committed offsets and restore.
func (d *exactlyOnce) settle() {
	if !d.needDrop {
		return
	}
	fatal := d.dropFatal
	d.needDrop, d.dropFatal = false, false
	d.dropWork(fatal)
	select {
	case d.r.rewinds <- struct{}{}:
	default:
	}
}

// abandon aborts the open transaction and forgets every owned partition's
// state, without rewinding: the partitions are being taken away.
func (d *exactlyOnce) abandon(why string) {
	d.r.opts.log.Warn("abandoning the open transaction", "reason", why)
	d.dropWork(false)
}

// dropWork undoes everything since the last commit: it aborts the open
// transaction (or, when the producer is beyond that, replaces it) and forgets
// the state of every owned partition and the resolutions since the commit.
func (d *exactlyOnce) dropWork(fatal bool) {
	d.r.m.transactions.WithLabelValues("aborted").Inc()
	if !fatal && d.txOpen {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := d.tx.Abort(ctx); err != nil {
			fatal = true
			d.r.opts.log.Warn("abort failed: replacing the producer", "error", err)
		}
		cancel()
	}
	if fatal {
		if err := d.tx.Reset(); err != nil {
			d.r.fail(fmt.Errorf("router: replacing the transactional producer: %w", err))
		}
	}
	d.txOpen, d.dirty, d.txBytes, d.urgent = false, false, 0, false
	d.txRecords, d.txOutputs = 0, 0
	d.sent = &atOnce{} // what is still in flight belongs to the dropped work
	d.r.engine.resolved.rollback()
	for tp := range d.r.assigned {
		if tp.Topic == d.r.cfg.Topics.Requests {
			d.r.engine.forgetPartition(tp.Partition)
		}
	}
}
