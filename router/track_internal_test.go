package router

import (
	"testing"

	"github.com/switchboard-mcp/switchboard/router/port"
)

// storeCalls records what a tracker stores.
type storeCalls []struct {
	tp   port.TopicPartition
	next int64
}

func (s *storeCalls) store(tp port.TopicPartition, next int64) {
	*s = append(*s, struct {
		tp   port.TopicPartition
		next int64
	}{tp, next})
}

// A burst of records done in one wake-up of the loop costs one store per
// partition, of the last offset, at the flush; none before it.
func TestTrackerFlushStoresOncePerPartition(t *testing.T) {
	var calls storeCalls
	tr := newTracker(calls.store)
	a, b := port.TopicPartition{Topic: "requests", Partition: 0}, port.TopicPartition{Topic: "responses", Partition: 3}
	for off := int64(0); off < 100; off++ {
		tr.release(tr.begin(a, off))
		tr.release(tr.begin(b, 1000+off))
	}
	if len(calls) != 0 {
		t.Fatalf("%d stores before the flush, want 0: %v", len(calls), calls)
	}
	tr.flush()
	if len(calls) != 2 || calls[0].tp != a || calls[0].next != 100 || calls[1].tp != b || calls[1].next != 1100 {
		t.Fatalf("stores at the flush = %v, want %v at 100 and %v at 1100", calls, a, b)
	}
	tr.flush()
	if len(calls) != 2 {
		t.Fatalf("a flush with nothing advanced stored again: %v", calls[2:])
	}
	// A record still held stops its partition's offset; the next flush
	// stores only what is past the done prefix.
	held := tr.begin(a, 100)
	tr.release(tr.begin(a, 101))
	tr.flush()
	if len(calls) != 2 {
		t.Fatalf("stored %v past a record still held", calls[2:])
	}
	tr.release(held)
	tr.flush()
	if len(calls) != 3 || calls[2].next != 102 {
		t.Fatalf("after the held record was done: %v, want %v at 102", calls[2:], a)
	}
}

// at_least_once stores what advanced before it forgets a revoked partition,
// and when it stops with nothing in flight.
func TestAtLeastOnceFlushesBeforeRevokeAndAtFinish(t *testing.T) {
	src := &storeSource{}
	d := newAtLeastOnce(&Router{src: src, engine: &engine{}})
	tp := port.TopicPartition{Topic: "requests", Partition: 1}
	d.handled(d.begin(tp, 7))
	d.revoke([]port.TopicPartition{tp}, false)
	if got := src.stored[tp]; got != 8 {
		t.Fatalf("stored %d for a revoked partition, want 8 (stored before it was forgotten)", got)
	}
	other := port.TopicPartition{Topic: "responses", Partition: 1}
	d.handled(d.begin(other, 41))
	d.finish()
	if got := src.stored[other]; got != 42 {
		t.Fatalf("stored %d at finish, want 42", got)
	}
}

// storeSource is a port.Source that keeps what StoreOffset stored.
type storeSource struct {
	port.Source
	stored map[port.TopicPartition]int64
}

func (s *storeSource) StoreOffset(tp port.TopicPartition, next int64) error {
	if s.stored == nil {
		s.stored = map[port.TopicPartition]int64{}
	}
	s.stored[tp] = next
	return nil
}

// A joint track (an intent's deferred state or its resolution, caused by
// several records) keeps each of its records from being stored until every
// output holding it is acknowledged, releases each once, and passes a
// failure on: a failed record is never stored past.
func TestJointTrackReleasesItsRecordsOnceWhenDone(t *testing.T) {
	var calls storeCalls
	tr := newTracker(calls.store)
	req, resp := port.TopicPartition{Topic: "requests"}, port.TopicPartition{Topic: "responses"}
	request, response := tr.begin(req, 0), tr.begin(resp, 0)
	request.hold() // the deferred state's hold, which the joint takes over
	response.hold()
	j := newJoint([]*track{request, response})
	j.hold() // the result
	j.hold() // the resolution marker
	tr.release(j)
	tr.release(request) // both records handled
	tr.release(response)
	tr.release(j) // the result acknowledged
	tr.flush()
	if len(calls) != 0 {
		t.Fatalf("stored %v with the marker unacknowledged", calls)
	}
	tr.release(j) // the marker acknowledged
	tr.flush()
	if len(calls) != 2 || calls[0].next != 1 || calls[1].next != 1 {
		t.Fatalf("stored %v, want both records at 1", calls)
	}

	calls = nil
	failed := tr.begin(req, 1)
	failed.hold()
	j = newJoint([]*track{failed})
	j.hold()
	tr.release(j)
	tr.release(failed)
	tr.fail(j) // the output could not be delivered
	tr.release(j)
	tr.flush()
	if len(calls) != 0 {
		t.Fatalf("stored %v past a record whose deferred output failed", calls)
	}
}
