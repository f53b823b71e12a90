package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
)

// forwardTx is the exactly_once baseline: the router's Kafka work under
// exactly_once with no routing, so that its fraction compares like with
// like. One consume-produce loop reads both the requests and the responses,
// as the router does; a request's copy (the dispatch) goes out at once
// outside any transaction, a response's copy (the result) into a Kafka
// transaction with the offsets of every record read, and a transaction is
// committed as soon as it holds a copy and the last commit has returned
// (group commit), after the dispatches sent since the last commit are
// acknowledged. Records read alone (dispatched requests) have their offsets
// committed at least every commit_interval. What it leaves out of the
// router's transactions: the pending-changelog and resolution records.
func (ph *phase) forwardTx(ctx context.Context) error {
	requests, responses := ph.cfg.Topics.Requests, ph.cfg.Topics.Responses
	src, err := kafkaio.NewSource(ph.kafka, ph.cfg.Kafka.GroupID+"-fwd", []string{requests, responses}, kafkaio.SourceOptions{Transactional: true})
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }() // leaving the group: nothing to do about an error
	tx, err := kafkaio.NewTxSink(ctx, ph.kafka, ph.cfg.Kafka.GroupID+"-fwd-tx")
	if err != nil {
		return err
	}
	defer func() { _ = tx.Close() }() // an open transaction aborts: its results are missing, which the report shows
	f := &txForwarder{src: src, tx: tx, to: map[string]string{
		requests: ph.cfg.Agents[benchIntentType].Topic, responses: ph.cfg.Topics.Results,
	}, results: responses, positions: map[port.TopicPartition]int64{}, every: ph.cfg.Router.CommitInterval.D(), clock: ph.clock}
	return f.run(ctx)
}

// txForwarder is forwardTx's loop state.
type txForwarder struct {
	src       *kafkaio.Source
	tx        *kafkaio.TxSink
	to        map[string]string // topic read → topic its copies go to
	results   string            // the topic whose copies go into transactions
	positions map[port.TopicPartition]int64
	every     time.Duration // commit_interval: the longest read offsets wait
	open      bool          // a transaction holds a result
	dirty     bool          // positions moved since the last commit
	unacked   int           // dispatches sent since the last commit, not yet acknowledged
	last      time.Time     // the last commit
	clock     clockwork.Clock
}

func (f *txForwarder) run(ctx context.Context) error {
	f.last = f.clock.Now()
	for ctx.Err() == nil {
		wait := 100
		if f.open {
			wait = 0 // take what is already there into this transaction, then commit
		}
		switch e := f.src.Poll(wait).(type) {
		case *port.Record:
			if err := f.copy(e); err != nil {
				return err
			}
			continue
		case *port.FatalError:
			return e
		case nil: // nothing more to read now: commit
		default:
			continue // the end of a partition, a rebalance, a passing error: read on
		}
		if err := f.takeAcks(ctx, false); err != nil {
			return err
		}
		if f.open || (f.dirty && f.clock.Since(f.last) >= f.every) {
			if err := f.commit(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// copy forwards one record: a request's at once, a response's into the
// transaction (opened if none is).
func (f *txForwarder) copy(r *port.Record) error {
	f.positions[port.TopicPartition{Topic: r.Topic, Partition: r.Partition}] = r.Offset + 1
	f.dirty = true
	out := &port.Output{Topic: f.to[r.Topic], Key: r.Key, Value: r.Value, Headers: r.Headers}
	if r.Topic != f.results {
		f.unacked++
		return f.tx.ProduceAtOnce(out, nil)
	}
	if !f.open {
		if err := f.tx.Begin(); err != nil {
			return err
		}
		f.open = true
	}
	return f.tx.Produce(out, nil)
}

// takeAcks counts the dispatches' acknowledgements; with wait, until every
// one is in (a failed one fails the run: the baseline does not redo).
func (f *txForwarder) takeAcks(ctx context.Context, wait bool) error {
	for f.unacked > 0 {
		var a port.Ack
		if wait {
			select {
			case a = <-f.tx.Acks():
			case <-ctx.Done():
				return ctx.Err()
			}
		} else {
			select {
			case a = <-f.tx.Acks():
			default:
				return nil
			}
		}
		f.unacked--
		if a.Err != nil {
			return fmt.Errorf("dispatching: %w", a.Err)
		}
	}
	return nil
}

// commit sends the positions read so far with the open transaction (opening
// one for offsets alone) and commits it once the dispatches are in.
func (f *txForwarder) commit(ctx context.Context) error {
	if !f.open {
		if err := f.tx.Begin(); err != nil {
			return err
		}
	}
	group, err := f.src.GroupMetadata()
	if err != nil {
		return err
	}
	if err := f.tx.SendOffsets(ctx, f.positions, group); err != nil {
		return fmt.Errorf("sending offsets: %w", err)
	}
	if err := f.takeAcks(ctx, true); err != nil {
		return err
	}
	if err := f.tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	f.open, f.dirty, f.last = false, false, f.clock.Now()
	return nil
}
