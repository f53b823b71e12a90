package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/switchboard-mcp/switchboard/router/lag"
)

// TransactionLog is the topic where Kafka's transaction coordinators keep
// each transactional id's state, one record per transition.
const TransactionLog = "__transaction_state"

// txnRecord is one state of a transaction in the transaction log.
type txnRecord struct {
	offset int64
	value  kmsg.TxnMetadataValue
}

// includes says whether the transaction's partitions in this state include
// topic[partition].
func (r txnRecord) includes(topic string, partition int32) bool {
	for _, t := range r.value.Topics {
		if t.Topic == topic && slices.Contains(t.Partitions, partition) {
			return true
		}
	}
	return false
}

// Decision implements lag.TxnAborter: it finds the transactional id that
// has producer p.ID (ListTransactions), reads that id's partition of the
// transaction log from Lookback before p's last write to its end, and
// returns how the coordinator ended the last transaction of p whose
// partitions included topic[partition] (decide). Reading the log needs
// Describe and Read on it under ACLs; a refusal wraps lag.ErrAbortRefused.
func (a *TxnAborter) Decision(ctx context.Context, topic string, partition int32, p lag.Producer) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, a.Timeout)
	defer cancel()
	ids, err := a.listTxnIDs(ctx, p.ID, nil)
	if err != nil {
		return false, err
	}
	if len(ids) != 1 {
		return false, fmt.Errorf("kafkaio: %d transactional ids have producer id %d now, not one: %w", len(ids), p.ID, lag.ErrNoDecision)
	}
	since := p.LastWrite.Add(-a.Lookback)
	recs, err := a.readTxnLog(ctx, ids[0], p.ID, since)
	if err != nil {
		return false, err
	}
	commit, err := decide(recs, topic, partition)
	if err != nil {
		return false, fmt.Errorf("kafkaio: transactional id %s, producer %d, since %s: %w", ids[0], p.ID, since.UTC().Format(time.RFC3339), err)
	}
	return commit, nil
}

// decide returns the coordinator's decision for the last transaction in
// recs (one producer's states, in log order) whose partitions included
// topic[partition]: commit once it reached PrepareCommit or CompleteCommit,
// abort once PrepareAbort, CompleteAbort or PrepareEpochFence (a later
// record of the same transactional id at a bumped epoch counts: a timed
// out transaction is aborted under the next epoch). A producer whose
// records never include the partition had no transaction on it the
// coordinator knew of, which is an abort (a late or stray write, the case
// KIP-664's tools abort). No records, or a last transaction still open in
// the log, wrap lag.ErrNoDecision.
func decide(recs []txnRecord, topic string, partition int32) (bool, error) {
	if len(recs) == 0 {
		return false, fmt.Errorf("no record of the producer in the transaction log: %w", lag.ErrNoDecision)
	}
	last := -1
	for i, r := range recs {
		if r.includes(topic, partition) {
			last = i
		}
	}
	if last < 0 {
		return false, nil
	}
	for _, r := range recs[last:] {
		switch r.value.State {
		case kmsg.TransactionStatePrepareCommit, kmsg.TransactionStateCompleteCommit:
			return true, nil
		case kmsg.TransactionStatePrepareAbort, kmsg.TransactionStateCompleteAbort, kmsg.TransactionStatePrepareEpochFence:
			return false, nil
		}
	}
	return false, fmt.Errorf("its last transaction on %s[%d] (log offset %d) is still %s: %w",
		topic, partition, recs[last].offset, recs[last].value.State, lag.ErrNoDecision)
}

// readTxnLog returns the records of transactional id txnID about producer
// pid (its producer id, or its previous one) in id's partition of the
// transaction log, from the first record at or after since to the log's
// end when the read began.
func (a *TxnAborter) readTxnLog(ctx context.Context, txnID string, pid int64, since time.Time) ([]txnRecord, error) {
	ends, err := a.adm.ListEndOffsets(ctx, TransactionLog)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("kafkaio: the end of %s: %w", TransactionLog, refusal(err))
	}
	n := len(ends[TransactionLog])
	if n == 0 {
		return nil, fmt.Errorf("kafkaio: %s has no partitions: %w", TransactionLog, lag.ErrNoDecision)
	}
	k := lag.OffsetsPartition(txnID, n) // the coordinator's partitionFor: the same hash as a group's
	end := ends[TransactionLog][k].Offset
	starts, err := a.adm.ListOffsetsAfterMilli(ctx, since.UnixMilli(), TransactionLog)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("kafkaio: %s's offset at %s: %w", TransactionLog, since.UTC().Format(time.RFC3339), refusal(err))
	}
	start := starts[TransactionLog][k].Offset
	if start < 0 || start >= end {
		return nil, nil
	}
	cl, err := kgo.NewClient(append(slices.Clone(a.opts),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{TransactionLog: {k: kgo.NewOffset().At(start)}}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()))...)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: a reader of %s: %w", TransactionLog, err)
	}
	defer cl.Close()
	var out []txnRecord
	for next := start; next < end; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("kafkaio: reading %s[%d] from %d to %d: at %d when the time ran out: %w", TransactionLog, k, start, end, next, err)
		}
		if err := fetchErr(fs); err != nil {
			return nil, fmt.Errorf("kafkaio: reading %s[%d]: %w", TransactionLog, k, refusal(err))
		}
		fs.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			if rec, ok := txnRecordOf(r, txnID, pid); ok && r.Offset < end {
				out = append(out, rec)
			}
		})
	}
	return out, nil
}

// fetchErr is the first error in fs other than a context's.
func fetchErr(fs kgo.Fetches) error {
	for _, e := range fs.Errors() {
		if !errors.Is(e.Err, context.Canceled) && !errors.Is(e.Err, context.DeadlineExceeded) {
			return e.Err
		}
	}
	return nil
}

// txnRecordOf decodes r when it is a state of txnID with producer pid.
func txnRecordOf(r *kgo.Record, txnID string, pid int64) (txnRecord, bool) {
	var key kmsg.TxnMetadataKey
	if r.Value == nil || key.ReadFrom(r.Key) != nil || key.TransactionalID != txnID {
		return txnRecord{}, false
	}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(r.Value); err != nil || (v.ProducerID != pid && v.PreviousProducerID != pid) {
		return txnRecord{}, false
	}
	return txnRecord{offset: r.Offset, value: v}, true
}
