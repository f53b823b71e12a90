package port

// Dead-letter headers: where a record came from and why it was set aside.
const (
	HeaderOriginalTopic     = "switchboard.original.topic"
	HeaderOriginalPartition = "switchboard.original.partition"
	HeaderOriginalOffset    = "switchboard.original.offset"
	HeaderErrorClass        = "switchboard.error.class"
	HeaderErrorMessage      = "switchboard.error.message"
	HeaderTraceparent       = "traceparent"
	// HeaderMovedFrom marks a record the router moved to the partition its
	// key hashes to, with the partition it was produced to.
	HeaderMovedFrom = "switchboard.moved.from"
	// HeaderReplayedFrom marks a record an operator put back from the
	// dead-letter topic (switchboard dlq replay): a request so marked is
	// served even though its intent was rejected within the dedup window,
	// the one exception to one result per intent (a repair: rejected, then
	// its real outcome).
	HeaderReplayedFrom = "switchboard.replayed.from"
)
