// Package routertest provides in-memory doubles of the router's Source and
// Sink, for tests and benchmarks of the router without Kafka, in the way
// net/http/httptest serves net/http.
package routertest

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/switchboard-mcp/switchboard/router/port"
)

// changes lets readers wait for the next change without polling.
type changes struct {
	mu sync.Mutex
	ch chan struct{}
}

func (c *changes) wait() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

func (c *changes) signal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

// Source is an in-memory port.Source: tests Push records and rebalance
// events, and read back what the router stored and paused.
type Source struct {
	clock    clockwork.Clock
	mu       sync.Mutex
	queue    []any
	onRevoke func([]port.TopicPartition, bool)
	lost     bool
	seeks    []port.TopicPartition
	stalled  map[port.TopicPartition]bool
	queued   map[port.TopicPartition]int // records queued, per partition
	stored   map[port.TopicPartition]int64
	stores   int // StoreOffset calls
	paused   map[port.TopicPartition]bool
	// holdPaused: paused partitions' records are not read (HoldPaused).
	holdPaused bool
	closed     bool
	pushed     changes
	updated    changes
	// committedErr, when set, is what Committed returns (a consumer whose
	// coordinator requests time out).
	committedErr error
}

var _ port.Source = (*Source)(nil)

// NewSource returns an empty Source. Poll waits in real time (up to its
// timeout) for a Push.
func NewSource() *Source {
	return &Source{clock: clockwork.NewRealClock(), stored: map[port.TopicPartition]int64{}, paused: map[port.TopicPartition]bool{}}
}

// Push queues a *port.Record, port.Assigned, port.Revoked or error.
func (s *Source) Push(evs ...any) {
	s.mu.Lock()
	s.queue = append(s.queue, evs...)
	for _, ev := range evs {
		if r, ok := ev.(*port.Record); ok {
			if s.queued == nil {
				s.queued = map[port.TopicPartition]int{}
			}
			s.queued[port.TopicPartition{Topic: r.Topic, Partition: r.Partition}]++
		}
	}
	s.mu.Unlock()
	s.pushed.signal()
}

// Poll implements port.Source. A Revoked event runs the revoke hook
// before Poll returns it, as a Kafka client's rebalance does.
func (s *Source) Poll(timeoutMs int) any {
	var deadline <-chan time.Time // made only when Poll has to wait
	for {
		wake := s.pushed.wait()
		s.mu.Lock()
		if i := s.next(); i >= 0 {
			ev := s.queue[i]
			if i == 0 {
				s.queue[0] = nil
				s.queue = s.queue[1:]
			} else {
				s.queue = append(s.queue[:i], s.queue[i+1:]...)
			}
			if r, ok := ev.(*port.Record); ok {
				s.queued[port.TopicPartition{Topic: r.Topic, Partition: r.Partition}]--
			}
			s.queueEnds(ev)
			hook := s.onRevoke
			s.mu.Unlock()
			s.updated.signal() // Pending changed
			if rv, ok := ev.(port.Revoked); ok {
				lost := s.AssignmentLost()
				if hook != nil {
					hook(rv, lost)
				}
				s.mu.Lock()
				s.lost = false
				s.mu.Unlock()
			}
			return ev
		}
		s.mu.Unlock()
		if deadline == nil {
			deadline = s.clock.After(time.Duration(timeoutMs) * time.Millisecond)
		}
		select {
		case <-wake:
		case <-deadline:
			return nil
		}
	}
}

// Pending returns how many pushed events Poll has not returned yet.
func (s *Source) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Stall keeps the records of a partition (and its end) from being read until
// Unstall, as a consumer that lags behind: they stay queued in order.
func (s *Source) Stall(tp port.TopicPartition) {
	s.mu.Lock()
	if s.stalled == nil {
		s.stalled = map[port.TopicPartition]bool{}
	}
	s.stalled[tp] = true
	s.mu.Unlock()
}

// Unstall lets a stalled partition be read again.
func (s *Source) Unstall(tp port.TopicPartition) {
	s.mu.Lock()
	delete(s.stalled, tp)
	s.mu.Unlock()
	s.pushed.signal()
}

// HoldPaused makes Poll skip the records of paused partitions until they
// are resumed, as librdkafka fetches none for a paused partition (and drops
// what it had prefetched). Without it the Source only records pauses:
// tests that push markers to a paused partition rely on that.
func (s *Source) HoldPaused() {
	s.mu.Lock()
	s.holdPaused = true
	s.mu.Unlock()
}

// next is the index of the first queued event that may be read, or -1.
func (s *Source) next() int {
	for i, ev := range s.queue {
		switch e := ev.(type) {
		case *port.Record:
			if tp := (port.TopicPartition{Topic: e.Topic, Partition: e.Partition}); s.stalled[tp] || (s.holdPaused && s.paused[tp]) {
				continue
			}
		case port.EndOfPartition:
			if s.stalled[port.TopicPartition(e)] {
				continue
			}
		}
		return i
	}
	return -1
}

// queueEnds queues an EndOfPartition next for each partition that ev leaves
// with nothing more to read, as a Kafka consumer reports reaching the end.
func (s *Source) queueEnds(ev any) {
	var tps []port.TopicPartition
	switch e := ev.(type) {
	case *port.Record:
		tps = []port.TopicPartition{{Topic: e.Topic, Partition: e.Partition}}
	case port.Assigned:
		tps = e
	}
	var ends []any
	for _, tp := range tps {
		if s.queued[tp] == 0 {
			ends = append(ends, port.EndOfPartition(tp))
		}
	}
	if len(ends) > 0 {
		s.queue = append(ends, s.queue...)
	}
}

// LoseAssignment makes AssignmentLost report true until the next Revoked
// event is read, as when the consumer's session timed out.
func (s *Source) LoseAssignment() {
	s.mu.Lock()
	s.lost = true
	s.mu.Unlock()
}

// AssignmentLost implements port.Source.
func (s *Source) AssignmentLost() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// OnRevoke implements port.Source.
func (s *Source) OnRevoke(f func([]port.TopicPartition, bool)) {
	s.mu.Lock()
	s.onRevoke = f
	s.mu.Unlock()
}

// Committed implements port.Source: what StoreOffset stored (as if
// committed at once) or a TxSink committed.
func (s *Source) Committed(tps []port.TopicPartition) (map[port.TopicPartition]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.committedErr != nil {
		return nil, s.committedErr
	}
	out := map[port.TopicPartition]int64{}
	for _, tp := range tps {
		if v, ok := s.stored[tp]; ok {
			out[tp] = v
		}
	}
	return out, nil
}

// FailCommitted makes Committed fail with err from now on (nil: succeed
// again), as a consumer stuck after a broker restart does.
func (s *Source) FailCommitted(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.committedErr = err
}

// Seek implements port.Source; it only records the call: tests push the
// records a real consumer would read again.
func (s *Source) Seek(tp port.TopicPartition, _ int64) error {
	s.mu.Lock()
	s.seeks = append(s.seeks, tp)
	s.mu.Unlock()
	s.updated.signal()
	return nil
}

// Seeks returns how many Seek calls were made.
func (s *Source) Seeks() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seeks)
}

// GroupMetadata implements port.Source.
func (s *Source) GroupMetadata() (any, error) { return "routertest-group", nil }

// StoreOffset implements port.Source.
func (s *Source) StoreOffset(tp port.TopicPartition, next int64) error {
	s.mu.Lock()
	s.stored[tp] = next
	s.stores++
	s.mu.Unlock()
	s.updated.signal()
	return nil
}

// Pause implements port.Source.
func (s *Source) Pause(tps []port.TopicPartition) error {
	s.mu.Lock()
	for _, tp := range tps {
		s.paused[tp] = true
	}
	s.mu.Unlock()
	s.updated.signal()
	return nil
}

// Resume implements port.Source.
func (s *Source) Resume(tps []port.TopicPartition) error {
	s.mu.Lock()
	for _, tp := range tps {
		delete(s.paused, tp)
	}
	s.mu.Unlock()
	s.pushed.signal() // a Poll waiting may read them now
	s.updated.signal()
	return nil
}

// Close implements port.Source.
func (s *Source) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.updated.signal()
	return nil
}

// Stored returns the offset stored for a partition, or -1.
func (s *Source) Stored(tp port.TopicPartition) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.stored[tp]; ok {
		return v
	}
	return -1
}

// StoreOffsets returns how many StoreOffset calls were made.
func (s *Source) StoreOffsets() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stores
}

// Paused reports whether a partition is paused.
func (s *Source) Paused(tp port.TopicPartition) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused[tp]
}

// Closed reports whether Close was called.
func (s *Source) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// WaitUntil waits for cond (checked after every store, pause, resume and
// close) to hold, or for ctx to end.
func (s *Source) WaitUntil(ctx context.Context, cond func(*Source) bool) error {
	for {
		wake := s.updated.wait()
		if cond(s) {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Sink is an in-memory port.Sink that keeps every output. By default it
// acknowledges each output at once; with Hold it keeps acknowledgements until
// Release (with HoldTopic, those of one topic's outputs until ReleaseTopic),
// so tests can check what waits for the broker.
type Sink struct {
	mu         sync.Mutex
	outputs    []port.Output
	held       []heldAck
	hold       bool
	holdTopics map[string]bool
	fail       map[string]error
	acks       chan port.Ack
	closed     bool
	changed    changes
	gate       chan struct{} // non-nil: Produce waits for it to close (Block)
	waiting    chan struct{} // closed when a Produce waits at the gate
}

var _ port.Sink = (*Sink)(nil)

// Block makes the next Produce calls wait until Unblock, which holds the
// router's event loop in the middle of a record; the returned channel
// closes once a Produce is waiting.
func (k *Sink) Block() <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gate, k.waiting = make(chan struct{}), make(chan struct{})
	return k.waiting
}

// Unblock lets the waiting and later Produce calls through.
func (k *Sink) Unblock() {
	k.mu.Lock()
	gate := k.gate
	k.gate = nil
	k.mu.Unlock()
	if gate != nil {
		close(gate)
	}
}

// NewSink returns an empty Sink.
func NewSink() *Sink {
	return &Sink{acks: make(chan port.Ack, 1<<16), fail: map[string]error{}}
}

// Hold keeps acknowledgements from now on until Release.
func (k *Sink) Hold() {
	k.mu.Lock()
	k.hold = true
	k.mu.Unlock()
}

// Release sends the held acknowledgements and stops holding (HoldTopic's
// too).
func (k *Sink) Release() {
	k.mu.Lock()
	held := k.held
	k.held, k.hold, k.holdTopics = nil, false, nil
	k.mu.Unlock()
	for _, h := range held {
		k.acks <- h.ack
	}
}

// heldAck is an acknowledgement Hold or HoldTopic keeps, and its output's
// topic.
type heldAck struct {
	topic string
	ack   port.Ack
}

// HoldTopic keeps the acknowledgements of the outputs to topic from now on,
// until ReleaseTopic or Release: a broker slow to acknowledge one partition.
func (k *Sink) HoldTopic(topic string) {
	k.mu.Lock()
	if k.holdTopics == nil {
		k.holdTopics = map[string]bool{}
	}
	k.holdTopics[topic] = true
	k.mu.Unlock()
}

// ReleaseTopic sends the held acknowledgements of topic's outputs and stops
// holding them (Hold's others stay held).
func (k *Sink) ReleaseTopic(topic string) {
	k.mu.Lock()
	delete(k.holdTopics, topic)
	var release []port.Ack
	keep := k.held[:0]
	for _, h := range k.held {
		if h.topic == topic {
			release = append(release, h.ack)
		} else {
			keep = append(keep, h)
		}
	}
	k.held = keep
	k.mu.Unlock()
	for _, a := range release {
		k.acks <- a
	}
}

// FailTopic makes deliveries to topic fail with err.
func (k *Sink) FailTopic(topic string, err error) {
	k.mu.Lock()
	k.fail[topic] = err
	k.mu.Unlock()
}

// Produce implements port.Sink. It copies the output.
func (k *Sink) Produce(o *port.Output, opaque any) error {
	k.mu.Lock()
	if gate := k.gate; gate != nil {
		select {
		case <-k.waiting:
		default:
			close(k.waiting)
		}
		k.mu.Unlock()
		<-gate
		k.mu.Lock()
	}
	k.outputs = append(k.outputs, *o)
	a := port.Ack{Opaque: opaque, Err: k.fail[o.Topic]}
	held := k.hold || k.holdTopics[o.Topic]
	if held {
		k.held = append(k.held, heldAck{topic: o.Topic, ack: a})
	}
	k.mu.Unlock()
	if !held {
		k.acks <- a
	}
	k.changed.signal()
	return nil
}

// Acks implements port.Sink.
func (k *Sink) Acks() <-chan port.Ack { return k.acks }

// Close implements port.Sink.
func (k *Sink) Close() error {
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	return nil
}

// Outputs returns the outputs written to topic so far, in order.
func (k *Sink) Outputs(topic string) []port.Output {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []port.Output
	for _, o := range k.outputs {
		if o.Topic == topic {
			out = append(out, o)
		}
	}
	return out
}

// Count returns how many outputs were written to topic.
func (k *Sink) Count(topic string) int { return len(k.Outputs(topic)) }

// WaitFor waits until at least n outputs were written to topic, or ctx ends,
// and returns the outputs of topic.
func (k *Sink) WaitFor(ctx context.Context, topic string, n int) ([]port.Output, error) {
	var outs []port.Output
	err := k.WaitUntil(ctx, topic, func(o []port.Output) bool { outs = o; return len(o) >= n })
	return outs, err
}

// WaitUntil waits until the outputs written to topic so far satisfy ok, or
// ctx ends.
func (k *Sink) WaitUntil(ctx context.Context, topic string, ok func([]port.Output) bool) error {
	for {
		wake := k.changed.wait()
		if ok(k.Outputs(topic)) {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
