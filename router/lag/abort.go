package lag

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Producer is a producer's state on one partition, as the partition's
// leader describes it (DescribeProducers).
type Producer struct {
	ID    int64
	Epoch int16
	// CoordinatorEpoch is the epoch of the transaction coordinator that
	// last wrote a marker for it here (-1: none yet).
	CoordinatorEpoch int32
	// LastWrite is the timestamp of its last batch on the partition (zero:
	// unknown).
	LastWrite time.Time
	// TxnStart is the first offset of its open transaction on the
	// partition; -1 when none is open.
	TxnStart int64
}

// TxnAborter is what the HangWatch asks to end a hanging transaction
// itself, as Kafka's own tool does (kafka-transactions.sh abort, KIP-664).
// Its methods honour ctx and bound their own wait.
type TxnAborter interface {
	// Producers describes the producers with state on topic[partition].
	Producers(ctx context.Context, topic string, partition int32) ([]Producer, error)
	// Live reports whether a transaction coordinator has p's transaction
	// on topic[partition] in progress (Ongoing, or being committed or
	// aborted, with the partition among its partitions): then the
	// coordinator will end it. A producer id the coordinator re-initialised
	// (a new epoch, its transaction on other partitions) is not live here.
	Live(ctx context.Context, topic string, partition int32, p Producer) (bool, error)
	// Abort writes an abort marker for p's open transaction on
	// topic[partition]. An error wrapping ErrAbortRefused says the
	// cluster will not let this client do it (its authorization).
	Abort(ctx context.Context, topic string, partition int32, p Producer) error
}

// ErrAbortRefused is what TxnAborter.Abort wraps when the cluster refuses
// the abort marker to this client (ClusterAction on the cluster is
// missing): retrying will not help.
var ErrAbortRefused = errors.New("lag: the cluster refused the abort marker")

// unsafeToAbort says why the watch leaves a hanging transaction to the
// operator.
type unsafeToAbort struct{ why string }

func (u unsafeToAbort) Error() string { return u.why }

// abortHanging ends h's transaction if nothing says it may be a live one:
// the producer whose transaction starts at h.Stable must have written
// nothing for at least the transaction timeout (WithHangAbortAfter: a
// coordinator that knows the transaction has it in progress until it has
// aborted it, so longer silence adds no safety), and no transaction
// coordinator may have a transaction of it in progress that includes the
// partition. It returns the producer aborted, or
// an error: unsafeToAbort when the transaction must be left alone, the
// aborter's error otherwise.
//
// Once that one is aborted, every other producer with a transaction open
// further on in the partition that passes the same two tests is aborted
// too (returned in more): the stable offset would otherwise stop at the
// next one and take the limit again before the watch saw it. A broker
// restart in the chaos test left two or three routers' transactions
// forgotten on one partition (the group's offsets among them), and finding
// them one limit after another held every takeover for minutes.
func (w *HangWatch) abortHanging(ctx context.Context, h Hanging, now time.Time) (p Producer, more []Producer, err error) {
	ps, err := w.aborter.Producers(ctx, h.Topic, h.Partition)
	if err != nil {
		return Producer{}, nil, err
	}
	found := false
	for _, c := range ps {
		if c.TxnStart == h.Stable {
			p, found = c, true
			break
		}
	}
	if !found {
		return Producer{}, nil, unsafeToAbort{fmt.Sprintf("no producer has a transaction open at offset %d", h.Stable)}
	}
	if err := w.abortIfForgotten(ctx, h, p, now); err != nil {
		return p, nil, err
	}
	for _, c := range ps {
		if c.TxnStart > h.Stable && w.abortIfForgotten(ctx, h, c, now) == nil {
			more = append(more, c)
		}
	}
	return p, more, nil
}

// abortIfForgotten aborts p's transaction on h's partition when p has been
// silent for the watch's limit and no coordinator has it in progress there.
func (w *HangWatch) abortIfForgotten(ctx context.Context, h Hanging, p Producer, now time.Time) error {
	switch {
	case p.LastWrite.IsZero():
		return unsafeToAbort{fmt.Sprintf("producer %d's last write has no timestamp", p.ID)}
	case now.Sub(p.LastWrite) < w.silent:
		return unsafeToAbort{fmt.Sprintf("producer %d wrote %s ago, less than %s", p.ID, now.Sub(p.LastWrite).Round(time.Second), w.silent)}
	}
	live, err := w.aborter.Live(ctx, h.Topic, h.Partition, p)
	if err != nil {
		return fmt.Errorf("asking the transaction coordinators about producer %d: %w", p.ID, err)
	}
	if live {
		return unsafeToAbort{fmt.Sprintf("a transaction coordinator has producer %d's transaction on it in progress", p.ID)}
	}
	return w.aborter.Abort(ctx, h.Topic, h.Partition, p)
}

// tryAbort runs abortHanging for a partition seen stuck at the same offset
// at an earlier sample and says what came of it: one line per abort and
// the counter; once the partition is reported hanging, one line per stuck
// offset when it cannot or must not (the operator's command stays in the
// first line). Until the cluster refuses it, the watch tries at each
// sample that still finds the partition stuck.
func (w *HangWatch) tryAbort(ctx context.Context, h Hanging, st *stuckAt, now time.Time) {
	if st == nil || st.refused {
		return
	}
	p, more, err := w.abortHanging(ctx, h, now)
	if ctx.Err() != nil {
		return
	}
	if err == nil {
		for _, a := range append([]Producer{p}, more...) {
			w.aborted.Inc()
			w.log.Warn(fmt.Sprintf("lag: aborted the hanging transaction on %s[%d]: producer %d (epoch %d) had left it open at offset %d, last writing at %s",
				h.Topic, h.Partition, a.ID, a.Epoch, a.TxnStart, a.LastWrite.UTC().Format(time.RFC3339)))
		}
		return
	}
	var unsafe unsafeToAbort
	refused := errors.Is(err, ErrAbortRefused)
	st.refused = refused
	if (st.abortLogged || !st.reported) && !refused { // before the report, quiet: most such transactions end by themselves
		return
	}
	st.abortLogged = true
	switch {
	case errors.As(err, &unsafe):
		w.log.Warn(fmt.Sprintf("lag: not aborting the hanging transaction on %s[%d] (offset %d): %s; abort it by hand if it stays: %s",
			h.Topic, h.Partition, h.Stable, unsafe.why, h.AbortCommand(w.bootstrap)))
	case refused:
		w.log.Error(fmt.Sprintf("lag: could not abort the hanging transaction on %s[%d] (offset %d): %v; give the router's principal ClusterAction on the cluster and Read on the topic, or abort it with: %s",
			h.Topic, h.Partition, h.Stable, err, h.AbortCommand(w.bootstrap)))
	default:
		w.log.Warn(fmt.Sprintf("lag: could not abort the hanging transaction on %s[%d] (offset %d) yet: %v (tried again at each sample; said once)",
			h.Topic, h.Partition, h.Stable, err))
	}
}
