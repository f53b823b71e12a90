package port

import (
	"context"
	"time"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// Header is a Kafka record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is one consumed Kafka record. The router does not keep Key, Value or
// Headers after the call that handed it the record returns.
type Record struct {
	Topic       string
	Partition   int32
	Offset      int64
	Key         []byte
	Value       []byte
	TimestampMs int64 // the record's timestamp: CreateTime or LogAppendTime, unix ms
	Headers     []Header
	// PolledAt is when the router's poll goroutine received the record (set
	// by the router): the start of the router's own share of its latency.
	PolledAt time.Time
}

// Header returns the value of the record's first header named key, and
// whether it has one.
func (r *Record) Header(key string) ([]byte, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value, true
		}
	}
	return nil, false
}

// Output is one record the router produces. Intent-keyed outputs are keyed by
// intent id and partitioned by the sink with murmur2, like Java clients. A nil
// Value is a tombstone.
type Output struct {
	Topic     string
	Partition *int32 // nil: the partitioner chooses
	Key       []byte
	Value     []byte
	Headers   []Header

	// Cause belongs to whoever produces the output; a Sink leaves it alone.
	// The router's at_least_once delivery keeps there the offset track of
	// the record that caused the output, so that the output is its own
	// delivery opaque and a produce allocates nothing more.
	Cause any
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Assigned is a Source event: these partitions are now this instance's.
type Assigned []TopicPartition

// Revoked is a Source event: these partitions are no longer this instance's.
type Revoked []TopicPartition

// EndOfPartition is a Source event: the consumer has read everything a
// partition held when it was fetched.
type EndOfPartition TopicPartition

// Ack is a Sink's report that an output was delivered (Err == nil) or failed.
type Ack struct {
	Opaque any
	Err    error
}

// Source is the consumer side of Kafka as the router's poll goroutine sees it.
// Poll, Committed and Seek are called from the poll goroutine only;
// StoreOffset, Pause, Resume and GroupMetadata may be called from the event
// loop concurrently with Poll.
type Source interface {
	// Poll waits up to timeoutMs and returns nil, a *Record, an Assigned,
	// Revoked or EndOfPartition event, or an error. An error that is a
	// *FatalError stops the router.
	Poll(timeoutMs int) any
	// OnRevoke sets a function that Poll calls when partitions are about to
	// be revoked, before they are given up: the router commits its work on
	// them there. lost says the partitions were lost (the session timed out,
	// or the member was fenced): another member may own them already, so
	// nothing may be committed for them.
	OnRevoke(func(tps []TopicPartition, lost bool))
	// AssignmentLost reports whether the consumer has lost its partitions
	// without a revocation yet (session timeout, fencing).
	AssignmentLost() bool
	// StoreOffset marks offset (the next offset to read) of a partition for
	// the next automatic commit (at_least_once).
	StoreOffset(tp TopicPartition, offset int64) error
	// Committed returns the group's committed offsets (next to read) of
	// partitions; a partition without one is absent.
	Committed(tps []TopicPartition) (map[TopicPartition]int64, error)
	// Seek moves an assigned partition's fetch position.
	Seek(tp TopicPartition, offset int64) error
	// GroupMetadata is what a transactional sink sends with the offsets it
	// commits (exactly_once); opaque to the router.
	GroupMetadata() (any, error)
	// Pause and Resume stop and restart fetching from partitions. A
	// partition assigned (again) is fetched, whatever pause it had before
	// it was revoked: the router forgets its pauses with the revocation.
	Pause(tps []TopicPartition) error
	Resume(tps []TopicPartition) error
	// Close commits what was stored (at_least_once), leaves the group and
	// releases the client.
	Close() error
}

// Sink is the producer side. Produce must not block for long: it queues the
// output and reports the delivery later on Acks, with the opaque it was given.
type Sink interface {
	Produce(out *Output, opaque any) error
	Acks() <-chan Ack
	// Close flushes queued outputs (for a bounded time) and releases the
	// producer.
	Close() error
}

// TxSink is a Sink whose outputs go into Kafka transactions (exactly_once).
// Its methods are called from the event loop only.
type TxSink interface {
	Sink
	// Begin starts a transaction.
	Begin() error
	// SendOffsets sends offsets (next to read) for the consumer group
	// described by group to the open transaction. The transaction's outputs
	// and what ProduceAtOnce sent need not be acknowledged yet: the router
	// sends the offsets while it waits for its dispatches' acknowledgements.
	// Errors are *TxnError.
	SendOffsets(ctx context.Context, offsets map[TopicPartition]int64, group any) error
	// Commit commits the open transaction (its outputs and the offsets sent
	// to it). Errors are *TxnError.
	Commit(ctx context.Context) error
	// Abort aborts the open transaction. Errors are *TxnError.
	Abort(ctx context.Context) error
	// Reset replaces a producer that hit a fatal error (fenced, or its
	// transactional state lost) with a new one under the same
	// transactional.id.
	Reset() error
	// ProduceAtOnce sends out outside any transaction, through a producer
	// that is neither transactional nor idempotent: read_committed readers
	// see it as soon as the broker has it, whether a transaction is open
	// or not, and an abort does not take it back. Its delivery is reported
	// on Acks with opaque, as a Sink reports Produce's. The router sends
	// its dispatch records this way and commits no transaction before
	// they are acknowledged (exactly_once: "dispatch at once").
	ProduceAtOnce(out *Output, opaque any) error
}

// TxRegistrar is what a TxSink may also do: Register, called right after
// Begin and before the transaction's first output, stages the owned
// partitions' offsets in the new transaction, which registers it with its
// coordinator. Group commit begins a transaction right after the previous
// one committed, while the broker still completes that one; librdkafka waits
// a fixed 20 ms before it retries registering output partitions refused
// meanwhile (CONCURRENT_TRANSACTIONS), but retries staging offsets after
// retry.backoff.ms. Errors are *TxnError.
type TxRegistrar interface {
	Register(ctx context.Context, offsets map[TopicPartition]int64, group any) error
}

// TxnError says what a failed transaction step needs.
type TxnError struct {
	Err error
	// Retriable: the same step may simply be tried again.
	Retriable bool
	// Abortable: abort the transaction and redo its work from the last
	// committed state.
	Abortable bool
	// Fatal: the producer must be replaced (Reset), then the work redone.
	Fatal bool
}

func (e *TxnError) Error() string { return "router: transaction: " + e.Err.Error() }
func (e *TxnError) Unwrap() error { return e.Err }

// PendingRecord is one live record of the pending changelog: the key it was
// read under (the intent's id, or its tenant and id, see intents.Scoped)
// and the intent's state. The router tombstones the record under that key.
type PendingRecord struct {
	Key    string
	Intent *schemas.PendingIntent
}

// Restorer reads the pending-state changelog.
type Restorer interface {
	// Restore returns the pending intents of the given partitions of the
	// pending changelog (the live value of every key), read to its end with
	// read_committed.
	Restore(ctx context.Context, partitions []int32) (map[int32][]PendingRecord, error)
}

// FallbackFeed reads the shared fallback-cache topic from its beginning and
// follows it, calling apply for every answer, until ctx ends.
type FallbackFeed func(ctx context.Context, apply func(*schemas.FallbackAnswer)) error

// FatalError is returned by a Source whose client can no longer work.
type FatalError struct{ Err error }

func (e *FatalError) Error() string { return "router: fatal Kafka error: " + e.Err.Error() }
func (e *FatalError) Unwrap() error { return e.Err }
