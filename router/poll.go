package router

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/switchboard-mcp/switchboard/router/port"
)

// OffsetBeginning asks Seek for a partition's first offset.
const OffsetBeginning int64 = -2

// poll is the poll goroutine. It never blocks on the event loop: when the
// loop's queue is full it keeps a backlog and pauses its partitions until the
// backlog drains, so max.poll.interval.ms never evicts the instance. It also
// restores the pending intents of partitions it is assigned before any of
// their records reach the loop, and rewinds to the committed offsets when the
// loop asks (after an aborted transaction).
func (r *Router) poll(ctx context.Context) error {
	var (
		backlog      []any
		backlogBytes int64 // of the records in backlog
		handed       int64 // of every record handed to the loop's queue: a running total
		assigned     = map[port.TopicPartition]bool{}
		paused       = map[port.TopicPartition]bool{}
		gate         = byteGate{max: r.cfg.Router.MaxPendingBytes, process: r.opts.processMemory}
	)
	// room reports whether ev may go to the loop now: the records on
	// their way to it hold less than the queue's byte bound (one record
	// always may, however large).
	room := func(ev any) bool {
		rec, ok := ev.(*port.Record)
		if !ok {
			return true
		}
		n := recordBytes(rec)
		if q := r.queuedBytes.Load(); q > 0 && q+n > r.opts.queueBytes {
			return false
		}
		r.queuedBytes.Add(n)
		return true
	}
	unroom := func(ev any) {
		if rec, ok := ev.(*port.Record); ok {
			r.queuedBytes.Add(-recordBytes(rec))
		}
	}
	send := func(ev any) {
		if len(backlog) == 0 && room(ev) {
			select {
			case r.events <- ev:
				if rec, ok := ev.(*port.Record); ok {
					handed += recordBytes(rec)
				}
				// Run the loop now, on this thread: otherwise it waits in
				// this P's run queue while Poll below blocks in C, until
				// the runtime retakes the P or wakes another thread, which
				// on a busy host is a scheduling round away (switchboard
				// bench at 1,000/s: in-router p50 0.37-0.44 ms without,
				// 0.08-0.09 ms with; BENCHMARKS.md).
				runtime.Gosched()
				return
			default:
				unroom(ev)
			}
		}
		backlog = append(backlog, ev)
		if rec, ok := ev.(*port.Record); ok {
			backlogBytes += recordBytes(rec)
		}
	}
	for ctx.Err() == nil {
		select {
		case <-r.rewinds:
			backlog, backlogBytes = backlog[:0], 0
			tps := make([]port.TopicPartition, 0, len(assigned))
			for tp := range assigned {
				tps = append(tps, tp)
			}
			rs, err := r.takeOver(ctx, tps, true)
			if err != nil {
				return err
			}
			send(rs)
		default:
		}
		for len(backlog) > 0 && room(backlog[0]) {
			select {
			case r.events <- backlog[0]:
				if rec, ok := backlog[0].(*port.Record); ok {
					backlogBytes -= recordBytes(rec)
					handed += recordBytes(rec)
				}
				backlog[0] = nil
				backlog = backlog[1:]
				continue
			default:
				unroom(backlog[0])
			}
			break
		}
		// What the pending intents hold and what is on its way to them:
		// everything fetched before a pause is admitted, so it is counted
		// before the next fetch (router/budget.go).
		// What the loop has taken is what was handed to it less what is
		// still queued.
		wasFull := gate.full
		queued := r.queuedBytes.Load()
		overBudget := gate.update(r.pendingBytes.Load(), queued+backlogBytes, handed-queued, r.opts.clock.Now())
		if overBudget != wasFull {
			r.opts.log.Debug("pending memory gate", "closed", overBudget, "cost_bytes", gate.cost, "budget_bytes", gate.max,
				"live_heap_bytes", gate.live, "memory_limit_bytes", gate.limit, "resident_bytes", gate.rss, "process_budget_bytes", gate.process)
		}
		r.applyPause(assigned, paused, len(backlog) > 0, r.backpressure.Load() || overBudget)

		// With a backlog the partitions are paused and Poll has nothing to
		// return: wait briefly, or the loop drains its queue and then idles
		// for the whole poll timeout (switchboard bench saw throughput
		// collapse above the knee instead of levelling off).
		timeout := 100
		if len(backlog) > 0 {
			timeout = 2
		}
		ev := r.src.Poll(timeout)
		switch e := ev.(type) {
		case nil:
			continue
		case *port.Record:
			e.PolledAt = r.opts.clock.Now()
		case error:
			var fatal *port.FatalError
			if errors.As(e, &fatal) {
				return e
			}
			r.opts.log.Warn("kafka consumer", "error", e)
			continue
		case port.Assigned:
			for _, tp := range e {
				assigned[tp] = true
			}
			rs, err := r.takeOver(ctx, e, false)
			if err != nil {
				return err
			}
			ev = rs
		case port.Revoked:
			for _, tp := range e {
				delete(assigned, tp)
				delete(paused, tp)
			}
			continue // the loop already handled it, in the revoke hook
		}
		send(ev)
	}
	return nil
}

// recordBytes is what a record weighs in the poll queue.
func recordBytes(rec *port.Record) int64 { return int64(len(rec.Key) + len(rec.Value)) }

// takeOver reads what the loop needs to own partitions: their committed
// offsets and the pending intents of the requests partitions. On a rewind it
// first seeks every partition back to its committed offset. It retries while
// the cluster is unavailable, until ctx ends.
func (r *Router) takeOver(ctx context.Context, tps []port.TopicPartition, rewind bool) (*restored, error) {
	start := r.opts.clock.Now()
	rs := &restored{tps: tps, rewind: rewind}
	var parts []int32
	for _, tp := range tps {
		if tp.Topic == r.cfg.Topics.Requests {
			parts = append(parts, tp.Partition)
		}
	}
	for attempt := 0; ; attempt++ {
		err := r.tryTakeOver(ctx, rs, parts)
		if err == nil {
			break
		}
		if r.src.AssignmentLost() {
			// The group took the partitions away while we waited (the
			// session ended during the outage): there is nothing left to
			// take over, and this consumer must rejoin. A fatal error makes
			// 'serve' replace it with new clients.
			return nil, &port.FatalError{Err: fmt.Errorf("taking over partitions failed %d times over %v and the consumer lost them: %w", attempt+1, r.opts.clock.Since(start).Round(time.Second), err)}
		}
		if attempt+1 >= takeOverAttempts && r.opts.clock.Since(start) >= takeOverGiveUp {
			// librdkafka's consumer can stay stuck after a broker restart
			// (its coordinator requests time out for good; seen in the chaos
			// test): its partitions make no progress while it holds them. A
			// fatal error makes 'serve' replace it with new clients.
			return nil, &port.FatalError{Err: fmt.Errorf("taking over partitions failed %d times over %v: %w", attempt+1, r.opts.clock.Since(start).Round(time.Second), err)}
		}
		r.opts.log.Warn("taking over partitions: will retry", "error", err, "attempt", attempt+1)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-r.opts.clock.After(backoff(attempt)):
		}
	}
	rs.took = r.opts.clock.Since(start)
	return rs, nil
}

func (r *Router) tryTakeOver(ctx context.Context, rs *restored, parts []int32) error {
	committed, err := r.src.Committed(rs.tps)
	if err != nil {
		return err
	}
	rs.committed = committed
	if rs.rewind {
		for _, tp := range rs.tps {
			off, ok := committed[tp]
			if !ok {
				off = OffsetBeginning
			}
			if err := r.src.Seek(tp, off); err != nil {
				return err
			}
		}
	}
	if r.opts.restorer != nil && len(parts) > 0 {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		pending, err := r.opts.restorer.Restore(rctx, parts)
		if err != nil {
			return err
		}
		rs.pending = pending
	}
	return nil
}

// A takeover that has failed takeOverAttempts times and for takeOverGiveUp
// gives up with a FatalError, so that the consumer is replaced. Waiting
// longer does not help the failure seen: in the chaos test's broker restart
// at load average 70 one consumer's committed-offsets reads timed out again
// and again ("GroupCoordinator: Timed out 0 in-flight, 1 retry-queued")
// while the group's other consumers, started at the same moment, read
// theirs at once: the broker had recovered, that client had not. A
// two-minute wait (tried for issue 21) kept its partitions stalled for the
// whole of it.
const (
	takeOverAttempts = 3
	takeOverGiveUp   = 20 * time.Second
)

func backoff(attempt int) time.Duration {
	d := 100 * time.Millisecond << min(attempt, 5)
	return min(d, 5*time.Second)
}

// applyPause pauses every assigned partition while the loop is behind, only
// the requests partitions while the pending table is full (responses must keep
// flowing to resolve intents), and resumes the rest.
func (r *Router) applyPause(assigned, paused map[port.TopicPartition]bool, behind, full bool) {
	var pause, resume []port.TopicPartition
	for tp := range assigned {
		want := behind || (full && tp.Topic == r.cfg.Topics.Requests)
		if want && !paused[tp] {
			pause = append(pause, tp)
			paused[tp] = true
		} else if !want && paused[tp] {
			resume = append(resume, tp)
			delete(paused, tp)
		}
	}
	if len(pause) > 0 {
		if err := r.src.Pause(pause); err != nil {
			r.opts.log.Warn("pausing partitions", "error", err)
		}
		r.m.paused.Set(1)
	}
	if len(resume) > 0 {
		if err := r.src.Resume(resume); err != nil {
			r.opts.log.Warn("resuming partitions", "error", err)
		}
		if len(paused) == 0 {
			r.m.paused.Set(0)
		}
	}
}
