package router

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The exactly_once transaction machinery of the event loop: group commit,
// opening, committing and dropping transactions. See delivery in
// docs/ARCHITECTURE.md.

// groupCommit commits the open transaction (exactly_once) as soon as it
// holds outputs. The loop is the only committer and a commit blocks it, so
// one commit is in flight at a time; what arrives meanwhile queues up and
// goes into the next transaction, taken whole by the next wake-up. Batches
// thus grow with the load, and an idle router commits each event at once
// instead of waiting for a commit_interval tick. A transaction that only
// moved positions (records that caused nothing) waits for commit_interval,
// which bounds how long any work stays uncommitted.
func (r *Router) groupCommit() {
	if r.tx != nil && r.txOpen && !r.discarding {
		r.commit()
	}
}

// begin opens a transaction for outputs (exactly_once) and, when the sink
// can, registers it with its coordinator before the first output (see
// TxRegistrar).
func (r *Router) begin() error {
	if err := r.tx.Begin(); err != nil {
		return err
	}
	r.txOpen = true
	reg, ok := r.tx.(TxRegistrar)
	if !ok {
		return nil
	}
	offsets := r.ownedOffsets()
	if len(offsets) == 0 {
		return nil
	}
	group, err := r.src.GroupMetadata()
	if err != nil {
		return &TxnError{Err: err, Abortable: true}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return reg.Register(ctx, offsets, group)
}

// ownedOffsets are the positions of the partitions this instance owns.
func (r *Router) ownedOffsets() map[TopicPartition]int64 {
	offsets := make(map[TopicPartition]int64, len(r.positions))
	for tp, off := range r.positions {
		if r.assigned[tp] {
			offsets[tp] = off
		}
	}
	return offsets
}

// commit commits the open transaction with the positions of every owned
// partition (exactly_once). Sending offsets in every transaction, even one
// that only holds a timer's outputs, is what fences a zombie instance: its
// commit fails once the group has moved on.
func (r *Router) commit() {
	defer r.settleFailure()
	now := r.opts.clock.Now()
	r.lastCommit = now.UnixMilli()
	if r.discarding {
		return // the last transaction aborted: nothing is open until the rewind
	}
	if !r.txOpen && !r.dirty {
		return
	}
	if r.src.AssignmentLost() {
		// The group has moved on without this member (session timeout,
		// fencing): a commit now might not be fenced, and another member may
		// already be redoing this work. Drop it; the revocation follows.
		r.abandon("assignment lost")
		return
	}
	offsets := r.ownedOffsets()
	if !r.txOpen {
		if len(offsets) == 0 {
			r.dirty = false
			return
		}
		if err := r.tx.Begin(); err != nil {
			r.txFailed(err)
			return
		}
		r.txOpen = true
	}
	group, err := r.src.GroupMetadata()
	if err != nil {
		r.txFailed(&TxnError{Err: err, Abortable: true})
		return
	}
	// Bounded: the loop waits here, and a commit that cannot finish in this
	// time is better aborted and redone.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for try := 1; ; try++ {
		err = r.tx.Commit(ctx, offsets, group)
		var te *TxnError
		if err == nil || !errors.As(err, &te) || !te.Retriable || try == 5 || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		r.txFailed(err)
		return
	}
	r.txOpen, r.dirty = false, false
	r.engine.resolved.commit()
	r.m.committed.Inc()
	r.m.commitSeconds.Observe(r.opts.clock.Since(now).Seconds())
	r.m.txRecords.Observe(float64(r.txRecords))
	r.m.txOutputs.Observe(float64(r.txOutputs))
	r.txRecords, r.txOutputs = 0, 0
}

// txFailed marks the open transaction failed: nothing more is produced, and
// once the current event is handled settleFailure aborts it (or, after a
// fatal error, replaces the producer) and redoes the work from the last
// committed state. Dropping at once would let the rest of the event add state
// (pending intents, resolutions) that outlives the abort.
func (r *Router) txFailed(err error) {
	r.opts.log.Warn("transaction failed: redoing its work from the last commit", "error", err)
	var te *TxnError
	r.dropFatal = r.dropFatal || (errors.As(err, &te) && te.Fatal)
	r.needDrop, r.discarding = true, true
}

// settleFailure, after an event in which a transaction failed, drops the
// work since the last commit (every owned partition is forgotten) and asks
// the poll goroutine to rewind to the committed offsets and restore.
func (r *Router) settleFailure() {
	if !r.needDrop {
		return
	}
	fatal := r.dropFatal
	r.needDrop, r.dropFatal = false, false
	r.dropWork(fatal)
	select {
	case r.rewinds <- struct{}{}:
	default:
	}
}

// abandon aborts the open transaction and forgets every owned partition's
// state, without rewinding: the partitions are being taken away.
func (r *Router) abandon(why string) {
	r.opts.log.Warn("abandoning the open transaction", "reason", why)
	r.dropWork(false)
}

// dropWork undoes everything since the last commit: it aborts the open
// transaction (or, when the producer is beyond that, replaces it) and forgets
// the state of every owned partition and the resolutions since the commit.
func (r *Router) dropWork(fatal bool) {
	r.m.transactions.WithLabelValues("aborted").Inc()
	if !fatal && r.txOpen {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := r.tx.Abort(ctx); err != nil {
			fatal = true
			r.opts.log.Warn("abort failed: replacing the producer", "error", err)
		}
		cancel()
	}
	if fatal {
		if err := r.tx.Reset(); err != nil {
			r.fail(fmt.Errorf("router: replacing the transactional producer: %w", err))
		}
	}
	r.txOpen, r.dirty = false, false
	r.txRecords, r.txOutputs = 0, 0
	r.engine.resolved.rollback()
	for tp := range r.assigned {
		if tp.Topic == r.cfg.Topics.Requests {
			r.engine.forgetPartition(tp.Partition)
		}
	}
}
