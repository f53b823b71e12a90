package api

import "testing"

// The send queue's hand-offs between the flush shard and the writer: who is
// told about the first message into an empty queue, and who may take.
func TestSendQueueOwnership(t *testing.T) {
	ready := func(q *sendQueue) bool {
		select {
		case <-q.ready:
			return true
		default:
			return false
		}
	}
	msg := []byte("m")

	q := newSendQueue(3, 1<<20) // pinned: the writer drains it all
	if ok, dirty := q.push(msg); !ok || dirty || !ready(q) {
		t.Fatalf("pinned push: ok %v, dirty %v, or no ready signal", ok, dirty)
	}
	if got := q.take(); got != nil {
		t.Fatalf("the shard took %d messages from a pinned queue", len(got))
	}

	q = newSendQueue(3, 1<<20)
	q.pinned = false
	if _, dirty := q.push(msg); !dirty || ready(q) {
		t.Fatal("the first message into an empty queue must make the connection dirty, not wake the writer")
	}
	if _, dirty := q.push(msg); dirty {
		t.Fatal("a second message made the connection dirty again")
	}
	if got := q.take(); len(got) != 2 {
		t.Fatalf("the shard took %d messages, want 2", len(got))
	}
	if _, dirty := q.push(msg); !dirty {
		t.Fatal("after a take the next message must make the connection dirty")
	}
	q.push(msg)
	q.push(msg)
	if ok, _ := q.push(msg); ok {
		t.Fatal("a fourth message fit a queue of 3")
	}

	q.handOver()
	if !ready(q) {
		t.Fatal("handOver did not wake the writer")
	}
	if got := q.take(); got != nil {
		t.Fatal("the shard took from a queue handed to the writer")
	}
	if got := q.takeOrRelease(); len(got) != 3 {
		t.Fatalf("the writer took %d messages, want 3", len(got))
	}
	if ok, dirty := q.push(msg); !ok || dirty || !ready(q) {
		t.Fatal("while the writer drains, a message must wake it, not the shard")
	}
	if got := q.takeOrRelease(); len(got) != 1 {
		t.Fatalf("the writer took %d messages, want 1", len(got))
	}
	if got := q.takeOrRelease(); got != nil {
		t.Fatal("an empty queue returned messages")
	}
	if _, dirty := q.push(msg); !dirty {
		t.Fatal("after the writer released the queue the shard must drain it again")
	}
}
