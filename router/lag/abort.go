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
	// Decision reads what p's transaction coordinator decided for the
	// last transaction of p that included topic[partition] (the
	// transaction log): commit true or false. An error wrapping
	// ErrNoDecision says the log does not tell; one wrapping
	// ErrAbortRefused, that this client may not read it.
	Decision(ctx context.Context, topic string, partition int32, p Producer) (commit bool, err error)
	// End writes p's marker on topic[partition], a commit or an abort,
	// ending its open transaction there. An error wrapping
	// ErrAbortRefused says the cluster will not let this client do it
	// (its authorization).
	End(ctx context.Context, topic string, partition int32, p Producer, commit bool) error
}

// ErrAbortRefused is what a TxnAborter's methods wrap when the cluster
// refuses this client what ending a transaction needs (ClusterAction on
// the cluster, Read on the transaction log): retrying will not help.
var ErrAbortRefused = errors.New("lag: the cluster refused the marker")

// ErrNoDecision is what TxnAborter.Decision wraps when the transaction
// log does not say how the coordinator ended the transaction.
var ErrNoDecision = errors.New("lag: the coordinator's decision is not in the transaction log")

// unsafeToEnd says why the watch leaves a hanging transaction to the
// operator.
type unsafeToEnd struct{ why string }

func (u unsafeToEnd) Error() string { return u.why }

// endHanging ends h's transaction, as its coordinator decided, if
// nothing says it may be a live one:
// the producer whose transaction starts at h.Stable must have written
// nothing for at least the transaction timeout (WithHangAbortAfter: a
// coordinator that knows the transaction has it in progress until it has
// aborted it, so longer silence adds no safety), and no transaction
// coordinator may have a transaction of it in progress that includes the
// partition. Its marker is the coordinator's own decision, read from the
// transaction log: Kafka 4.x's coordinator completes a transaction without
// writing its markers to partitions that have no leader at that moment
// (KRaftMetadataCache.getPartitionLeaderEndpoint answers "no such
// partition" for a leaderless one, and the marker manager skips it as
// deleted; KAFKA-20734, open), which every partition of a single broker is
// during its controlled shutdown. Such a transaction was committed more
// often than not, and aborting it would throw away results, changelog
// records and offsets a router had been told were committed. It returns
// the producer ended, or an error: unsafeToEnd when the transaction must
// be left alone, the aborter's error otherwise.
//
// Once that one is ended, every other producer with a transaction open
// further on in the partition that passes the same tests is ended too,
// each as its own coordinator decided (returned in more): the stable offset would otherwise stop at the
// next one and take the limit again before the watch saw it. A broker
// restart in the chaos test left two or three routers' transactions
// forgotten on one partition (the group's offsets among them), and finding
// them one limit after another held every takeover for minutes.
func (w *HangWatch) endHanging(ctx context.Context, h Hanging, now time.Time) (p ended, more []ended, err error) {
	ps, err := w.aborter.Producers(ctx, h.Topic, h.Partition)
	if err != nil {
		return ended{}, nil, err
	}
	found := false
	for _, c := range ps {
		if c.TxnStart == h.Stable {
			p.Producer, found = c, true
			break
		}
	}
	if !found {
		return ended{}, nil, unsafeToEnd{fmt.Sprintf("no producer has a transaction open at offset %d", h.Stable)}
	}
	if p.commit, err = w.endIfForgotten(ctx, h, p.Producer, now); err != nil {
		return p, nil, err
	}
	for _, c := range ps {
		if c.TxnStart <= h.Stable {
			continue
		}
		if commit, err := w.endIfForgotten(ctx, h, c, now); err == nil {
			more = append(more, ended{c, commit})
		}
	}
	return p, more, nil
}

// ended is a producer whose transaction the watch ended, and how.
type ended struct {
	Producer
	commit bool
}

// endIfForgotten ends p's transaction on h's partition as its coordinator
// decided, when p has been silent for the transaction timeout and no
// coordinator has it in progress there; it returns the decision.
func (w *HangWatch) endIfForgotten(ctx context.Context, h Hanging, p Producer, now time.Time) (commit bool, err error) {
	switch {
	case p.LastWrite.IsZero():
		return false, unsafeToEnd{fmt.Sprintf("producer %d's last write has no timestamp", p.ID)}
	case now.Sub(p.LastWrite) < w.silent:
		return false, unsafeToEnd{fmt.Sprintf("producer %d wrote %s ago, less than %s", p.ID, now.Sub(p.LastWrite).Round(time.Second), w.silent)}
	}
	live, err := w.aborter.Live(ctx, h.Topic, h.Partition, p)
	if err != nil {
		return false, fmt.Errorf("asking the transaction coordinators about producer %d: %w", p.ID, err)
	}
	if live {
		return false, unsafeToEnd{fmt.Sprintf("a transaction coordinator has producer %d's transaction on it in progress", p.ID)}
	}
	commit, err = w.aborter.Decision(ctx, h.Topic, h.Partition, p)
	if errors.Is(err, ErrNoDecision) {
		return false, unsafeToEnd{fmt.Sprintf("how producer %d's coordinator ended its transaction cannot be read (%v), and a wrong marker would lose or expose its records", p.ID, err)}
	}
	if err != nil {
		return false, fmt.Errorf("reading producer %d's transaction in the transaction log: %w", p.ID, err)
	}
	return commit, w.aborter.End(ctx, h.Topic, h.Partition, p, commit)
}

// tryEnd runs endHanging for a partition seen stuck at the same offset
// at an earlier sample and says what came of it: one line per abort and
// the counter; once the partition is reported hanging, one line per stuck
// offset when it cannot or must not (the operator's command stays in the
// first line). Until the cluster refuses it, the watch tries at each
// sample that still finds the partition stuck.
func (w *HangWatch) tryEnd(ctx context.Context, h Hanging, st *stuckAt, now time.Time) {
	if st == nil || st.refused {
		return
	}
	p, more, err := w.endHanging(ctx, h, now)
	if ctx.Err() != nil {
		return
	}
	if err == nil {
		for _, a := range append([]ended{p}, more...) {
			verb, why := "aborted", "its coordinator had aborted it or never had the partition in it"
			if a.commit {
				verb, why = "committed", "its coordinator had committed it without writing the marker here"
				w.committed.Inc()
			} else {
				w.aborted.Inc()
			}
			w.log.Warn(fmt.Sprintf("lag: %s the hanging transaction on %s[%d]: producer %d (epoch %d) had left it open at offset %d, last writing at %s; %s",
				verb, h.Topic, h.Partition, a.ID, a.Epoch, a.TxnStart, a.LastWrite.UTC().Format(time.RFC3339), why))
		}
		return
	}
	var unsafe unsafeToEnd
	refused := errors.Is(err, ErrAbortRefused)
	st.refused = refused
	if (st.abortLogged || !st.reported) && !refused { // before the report, quiet: most such transactions end by themselves
		return
	}
	st.abortLogged = true
	switch {
	case errors.As(err, &unsafe):
		w.log.Warn(fmt.Sprintf("lag: not ending the hanging transaction on %s[%d] (offset %d): %s; if it stays, and its transaction was not committed, abort it by hand: %s",
			h.Topic, h.Partition, h.Stable, unsafe.why, h.AbortCommand(w.bootstrap)))
	case refused:
		w.log.Error(fmt.Sprintf("lag: could not end the hanging transaction on %s[%d] (offset %d): %v; give the router's principal ClusterAction on the cluster and Read on the topic and on __transaction_state, or, if its transaction was not committed, abort it by hand: %s",
			h.Topic, h.Partition, h.Stable, err, h.AbortCommand(w.bootstrap)))
	default:
		w.log.Warn(fmt.Sprintf("lag: could not end the hanging transaction on %s[%d] (offset %d) yet: %v (tried again at each sample; said once)",
			h.Topic, h.Partition, h.Stable, err))
	}
}
