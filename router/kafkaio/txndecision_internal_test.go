package kafkaio

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/switchboard-mcp/switchboard/router/lag"
)

// txnState is a transaction log record of producer 7 at epoch e in state
// st with partitions of topic "t".
func txnState(e int16, st kmsg.TransactionState, partitions ...int32) txnRecord {
	v := kmsg.NewTxnMetadataValue()
	v.ProducerID, v.ProducerEpoch, v.State = 7, e, st
	if len(partitions) > 0 {
		v.Topics = []kmsg.TxnMetadataValueTopic{{Topic: "t", Partitions: partitions}}
	}
	return txnRecord{value: v}
}

func TestDecide(t *testing.T) {
	const (
		ongoing  = kmsg.TransactionStateOngoing
		pcommit  = kmsg.TransactionStatePrepareCommit
		ccommit  = kmsg.TransactionStateCompleteCommit
		pabort   = kmsg.TransactionStatePrepareAbort
		cabort   = kmsg.TransactionStateCompleteAbort
		fence    = kmsg.TransactionStatePrepareEpochFence
		empty    = kmsg.TransactionStateEmpty
		noAnswer = "no decision"
	)
	for _, c := range []struct {
		name string
		recs []txnRecord
		want any // true, false or noAnswer
	}{
		// The chaos failure: committed, its markers skipped on leaderless
		// partitions, then the lane initialised again after the restart.
		{"committed, then re-initialised", []txnRecord{txnState(1, ongoing, 4), txnState(1, pcommit, 4, 5), txnState(1, ccommit), txnState(2, empty)}, true},
		{"aborted", []txnRecord{txnState(1, ongoing, 4), txnState(1, pabort, 4), txnState(1, cabort)}, false},
		{"timed out: aborted under the next epoch", []txnRecord{txnState(1, ongoing, 4), txnState(2, pabort, 4), txnState(2, cabort)}, false},
		{"fenced", []txnRecord{txnState(1, ongoing, 4), txnState(2, fence, 4)}, false},
		{"transaction version 2: the commit bumps the epoch", []txnRecord{txnState(3, ongoing, 4), txnState(4, pcommit, 4)}, true},
		{"the last transaction on the partition decides", []txnRecord{txnState(1, ongoing, 4), txnState(1, pabort, 4), txnState(1, cabort), txnState(1, ongoing, 4), txnState(1, pcommit, 4), txnState(1, ccommit), txnState(1, ongoing, 5), txnState(1, pabort, 5)}, true},
		{"never on the partition: a stray write", []txnRecord{txnState(0, empty), txnState(1, empty), txnState(1, ongoing, 5)}, false},
		{"still open in the log", []txnRecord{txnState(1, pcommit, 4), txnState(1, ccommit), txnState(1, ongoing, 4)}, noAnswer},
		{"no record", nil, noAnswer},
	} {
		t.Run(c.name, func(t *testing.T) {
			commit, err := decide(c.recs, "t", 4)
			switch {
			case c.want == noAnswer:
				if !errors.Is(err, lag.ErrNoDecision) {
					t.Fatalf("decide = %v, %v; want an error wrapping ErrNoDecision", commit, err)
				}
			case err != nil || commit != c.want:
				t.Fatalf("decide = %v, %v; want %v", commit, err, c.want)
			}
		})
	}
}
