package router

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
}

// Output is one record the router produces. Intent-keyed outputs are keyed by
// intent id and partitioned by the sink with murmur2, like Java clients.
type Output struct {
	Topic   string
	Key     []byte
	Value   []byte
	Headers []Header
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Assigned is a Source event: these partitions are now this instance's.
type Assigned []TopicPartition

// Revoked is a Source event: these partitions are no longer this instance's.
// The router forgets their pending intents (their requests are not committed,
// so the next owner replays them) and stops tracking their offsets.
type Revoked []TopicPartition

// Ack is a Sink's report that an output was delivered (Err == nil) or failed.
type Ack struct {
	Opaque any
	Err    error
}

// Source is the consumer side of Kafka as the router's poll goroutine sees it.
// Poll is called from one goroutine only; StoreOffset, Pause and Resume may be
// called from the event loop concurrently with Poll.
type Source interface {
	// Poll waits up to timeoutMs and returns nil, a *Record, an Assigned or
	// Revoked event, or an error. A non-nil error that IsFatal reports stops
	// the router.
	Poll(timeoutMs int) any
	// StoreOffset marks offset (the next offset to read) of a partition for
	// the next commit.
	StoreOffset(tp TopicPartition, offset int64) error
	// Pause and Resume stop and restart fetching from partitions.
	Pause(tps []TopicPartition) error
	Resume(tps []TopicPartition) error
	// Close commits what was stored, leaves the group and releases the client.
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

// FatalError is returned by a Source whose client can no longer work.
type FatalError struct{ Err error }

func (e *FatalError) Error() string { return "router: fatal Kafka error: " + e.Err.Error() }
func (e *FatalError) Unwrap() error { return e.Err }
