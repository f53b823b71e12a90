package api

import "sync"

// sendQueue holds the messages waiting for one connection: a bounded slice
// under a mutex, and who drains it.
//
// Normally a flush shard drains it (flush.go): the first message pushed
// into an empty queue puts the connection on its shard's dirty list, and the
// shard's goroutine writes everything queued with one non-blocking write.
// When a write cannot complete at once (the client reads slowly) or the
// connection has no file descriptor to write to without blocking, the
// connection's own writer goroutine drains it instead, with blocking writes
// under the keepalive's WriteWait, until the queue is empty again.
//
// A buffered channel per connection, drained by the connection's goroutine,
// did the same job, but at thousands of subscribers of one session each
// result made thousands of goroutines runnable, the fan-out then got a
// thousandth of the CPU, and each writer found one or two messages to write:
// a write(2) per delivery (BENCHMARKS.md).
type sendQueue struct {
	mu       sync.Mutex
	msgs     [][]byte
	spare    [][]byte // the slice the last take returned, handed back
	bytes    int      // of msgs
	max      int
	maxBytes int
	writer   bool // the connection's writer goroutine drains the queue
	pinned   bool // … always: there is no fast path for this connection

	ready chan struct{} // buffered 1: the writer has messages to drain
}

// newSendQueue returns a queue of at most max messages and maxBytes bytes
// that its writer drains until unpinned.
func newSendQueue(max, maxBytes int) *sendQueue {
	return &sendQueue{max: max, maxBytes: maxBytes, pinned: true, ready: make(chan struct{}, 1)}
}

// push queues msg. It returns false, queuing nothing, if max messages are
// already waiting or msg would take the queue past maxBytes (an empty
// queue takes a message of any size), and whether the queue was empty and the shard, not the
// writer, drains it (so the caller must put the connection on the shard's
// dirty list). When the writer drains it, push signals ready itself.
func (q *sendQueue) push(msg []byte) (ok, dirty bool) {
	q.mu.Lock()
	if len(q.msgs) >= q.max || (len(q.msgs) > 0 && q.bytes+len(msg) > q.maxBytes) {
		q.mu.Unlock()
		return false, false
	}
	q.msgs = append(q.msgs, msg)
	q.bytes += len(msg)
	first, writer := len(q.msgs) == 1, q.writer || q.pinned
	q.mu.Unlock()
	if first && writer {
		q.signal()
	}
	return true, first && !writer
}

func (q *sendQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take is the shard's: everything queued, or nil if the writer drains the
// queue. Give the slice back with done.
func (q *sendQueue) take() [][]byte {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.writer || q.pinned {
		return nil
	}
	return q.swapLocked()
}

func (q *sendQueue) swapLocked() [][]byte {
	msgs := q.msgs
	q.msgs, q.spare, q.bytes = q.spare[:0], nil, 0
	return msgs
}

// handOver makes the writer drain the queue from now on, and wakes it.
func (q *sendQueue) handOver() {
	q.mu.Lock()
	q.writer = true
	q.mu.Unlock()
	q.signal()
}

// takeOrRelease is take for the writer: when nothing is queued, the shard
// drains the queue again from the next push (unless the queue is pinned).
func (q *sendQueue) takeOrRelease() [][]byte {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.msgs) == 0 && !q.pinned {
		q.writer = false
		return nil
	}
	return q.swapLocked()
}

// done gives back a slice take returned, for the next take: the two slices
// alternate, so a steady stream allocates nothing.
func (q *sendQueue) done(msgs [][]byte) {
	clear(msgs)
	q.mu.Lock()
	if q.spare == nil {
		q.spare = msgs[:0]
	}
	q.mu.Unlock()
}

// len returns how many messages wait.
func (q *sendQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.msgs)
}
