package kafkaio

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jonboulle/clockwork"

	"github.com/switchboard-mcp/switchboard/router/port"
)

// GroupReader is a member of a consumer group that commits only what its
// owner has finished with: the Go agent runner's consumer (intents/client).
// Every record is handed over with a done function; per partition, the
// reader commits up to the lowest offset read and not yet done (the records
// before it are all done), so a member that dies re-reads, after it or
// another member takes the partition, every record it had not finished.
// That is at-least-once: a record done but behind one that is not is read
// again too.
//
// It commits on an interval, when the group takes partitions away (before
// they go, unless the assignment is lost) and at Close. Neither librdkafka's
// automatic commits nor its automatic offset store are used. A commit never
// holds up reading: the interval's commit runs on a goroutine of its own, one
// at a time (a tick while one is under way is skipped), and the commit
// before partitions go is waited for at most revokeCommitWait. librdkafka's
// commit can take a minute or more when the coordinator is gone (it queues
// the request for the coordinator it is looking for, socket.timeout.ms and
// retries), and a reader that waited for it served no rebalance and read
// nothing meanwhile. Read and Close must not run at the same time; done may
// be called from any goroutine.
type GroupReader struct {
	c        *consumer
	topics   []string
	clock    clockwork.Clock
	interval time.Duration
	onError  func(error)

	mu       sync.Mutex
	marks    map[port.TopicPartition]*offsetMarks // the partitions assigned now
	inflight chan struct{}                        // the commit under way, closed when it returns; nil: none
}

// revokeCommitWait bounds how long the commit of the partitions the group
// takes away holds up the rebalance (and so Read). Past it the revoke goes
// on; the commit may still land, and what it does not commit is read again
// by the partitions' next owner.
const revokeCommitWait = 5 * time.Second

// GroupReaderOptions are a GroupReader's optional knobs.
type GroupReaderOptions struct {
	// CommitInterval is how often Read commits what is done; default 1 s.
	CommitInterval time.Duration
	// Clock paces CommitInterval; default the real clock.
	Clock clockwork.Clock
	// OnCommitError hears of a commit that failed (the broker is away,
	// say); the next commit tries again from where the last one that
	// succeeded left off. It runs on the reader's commit goroutine or the
	// one that calls Close, one call at a time; it must not call Read or
	// Close.
	OnCommitError func(error)
}

// NewGroupReader joins groupID and subscribes to topics. A new group starts
// at the beginning of the topics, so that records written before a member
// first joined are not missed.
func NewGroupReader(s Settings, groupID string, topics []string, o GroupReaderOptions) (*GroupReader, error) {
	if o.CommitInterval <= 0 {
		o.CommitInterval = time.Second
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.OnCommitError == nil {
		o.OnCommitError = func(error) {}
	}
	c, err := newConsumer(s, "consumer", groupReaderSettings(groupID))
	if err != nil {
		return nil, err
	}
	c.group = groupID
	g := &GroupReader{c: c, topics: topics, clock: o.Clock, interval: o.CommitInterval, onError: o.OnCommitError, marks: map[port.TopicPartition]*offsetMarks{}}
	if err := c.SubscribeTopics(topics, g.rebalance); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("kafkaio: subscribing to %v: %w", topics, err)
	}
	return g, nil
}

// groupReaderSettings are the consumer settings a GroupReader insists on
// (its re-bootstrap after 10 s without metadata comes with every client's
// settings, configMapFor).
func groupReaderSettings(groupID string) kafka.ConfigMap {
	owned := kafka.ConfigMap{
		"group.id":                 groupID,
		"auto.offset.reset":        "earliest",
		"enable.auto.commit":       false,
		"enable.auto.offset.store": false,
		"isolation.level":          "read_committed",
		"enable.partition.eof":     false,
	}
	return owned
}

// Read hands every record to fn, with the function that marks it done, until
// ctx ends, fn returns an error or the client hits a fatal error; it commits
// every CommitInterval meanwhile. A record whose done is never called holds
// its partition's commits where it is. done is idempotent and cheap.
func (g *GroupReader) Read(ctx context.Context, fn func(rec *port.Record, done func()) error) error {
	ticker := g.clock.NewTicker(g.interval)
	defer ticker.Stop()
	for ctx.Err() == nil {
		select {
		case <-ticker.Chan():
			g.commitAsync(nil)
		default:
		}
		switch e := g.c.Poll(100).(type) {
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				continue
			}
			rec := recordOf(e)
			if err := fn(rec, g.read(rec)); err != nil {
				return err
			}
		case kafka.Error:
			if err := g.c.denial(e, g.topics); err != nil {
				return err // refused or denied: one line, not retries until a timeout
			}
			if e.IsFatal() {
				return fmt.Errorf("kafkaio: reading as a member of a group: %w", e)
			}
		}
	}
	return nil
}

// Close waits for a commit under way, commits what is done and leaves the
// group. With the broker away it can take as long as librdkafka waits for
// the group's coordinator (the session timeout, or longer): a caller that
// must stop bounds it (intents/client's Agent does).
func (g *GroupReader) Close() error {
	g.mu.Lock()
	inflight := g.inflight
	g.mu.Unlock()
	if inflight != nil {
		<-inflight // the consumer must outlive a commit under way
	}
	if done := g.commitAsync(nil); done != nil {
		<-done
	}
	return g.c.Close()
}

// read starts tracking rec and returns its done function.
func (g *GroupReader) read(rec *port.Record) func() {
	tp := port.TopicPartition{Topic: rec.Topic, Partition: rec.Partition}
	g.mu.Lock()
	m := g.marks[tp]
	if m == nil { // a record of a partition whose assignment we did not hear of
		m = &offsetMarks{committed: -1}
		g.marks[tp] = m
	}
	m.read(rec.Offset)
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			m.done(rec.Offset) // a partition since revoked: m is no longer in g.marks, and nothing reads it
			g.mu.Unlock()
		})
	}
}

// rebalance runs inside Poll: the partitions the group takes away are
// committed first (unless they are lost: another member may own them already,
// and the broker would refuse the commit), then forgotten, so that what is
// done later for them cannot move a new assignment's commits.
func (g *GroupReader) rebalance(_ *kafka.Consumer, ev kafka.Event) error {
	switch e := ev.(type) {
	case kafka.AssignedPartitions:
		g.mu.Lock()
		for _, tp := range fromKafka(e.Partitions) {
			g.marks[tp] = &offsetMarks{committed: -1}
		}
		g.mu.Unlock()
	case kafka.RevokedPartitions:
		tps := fromKafka(e.Partitions)
		if !g.c.AssignmentLost() {
			g.commitRevoked(tps)
		}
		g.mu.Lock()
		for _, tp := range tps {
			delete(g.marks, tp)
		}
		g.mu.Unlock()
	}
	return nil
}

// commitRevoked commits the partitions the group takes away, after the
// commit under way if any, waiting for both at most revokeCommitWait.
func (g *GroupReader) commitRevoked(tps []port.TopicPartition) {
	deadline := g.clock.After(revokeCommitWait)
	g.mu.Lock()
	inflight := g.inflight
	g.mu.Unlock()
	if inflight != nil {
		select {
		case <-inflight:
		case <-deadline:
			return
		}
	}
	if done := g.commitAsync(tps); done != nil {
		select {
		case <-done:
		case <-deadline:
		}
	}
}

// commitAsync starts committing, for the partitions given (nil: every
// partition assigned), the position of each that moved since its last
// commit, on a goroutine of its own, and returns a channel closed when that
// commit returns. It starts nothing, and returns nil, while another commit
// is under way or when nothing moved.
func (g *GroupReader) commitAsync(only []port.TopicPartition) <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight != nil {
		select {
		case <-g.inflight:
			g.inflight = nil
		default:
			return nil
		}
	}
	var offsets []kafka.TopicPartition
	var moved []*offsetMarks
	var positions []int64
	add := func(tp port.TopicPartition, m *offsetMarks) {
		if pos, ok := m.position(); ok && pos != m.committed {
			topic := tp.Topic
			offsets = append(offsets, kafka.TopicPartition{Topic: &topic, Partition: tp.Partition, Offset: kafka.Offset(pos)})
			moved, positions = append(moved, m), append(positions, pos)
		}
	}
	if only == nil {
		for tp, m := range g.marks {
			add(tp, m)
		}
	} else {
		for _, tp := range only {
			if m := g.marks[tp]; m != nil {
				add(tp, m)
			}
		}
	}
	if len(offsets) == 0 {
		return nil
	}
	done := make(chan struct{})
	g.inflight = done
	go func() {
		defer close(done)
		if _, err := g.c.CommitOffsets(offsets); err != nil {
			g.onError(fmt.Errorf("kafkaio: committing %d partitions' offsets: %w", len(offsets), err))
			return
		}
		g.mu.Lock()
		for i, m := range moved {
			m.committed = positions[i]
		}
		g.mu.Unlock()
	}()
	return done
}

// offsetMarks tracks one partition's records between read and done: the
// position to commit is the lowest offset read and not done, or, when every
// record read is done, the one after the last read. Offsets are read in
// increasing order (they may skip: transaction markers, compaction).
type offsetMarks struct {
	pending   []int64 // offsets read and not yet known done, increasing
	doneAhead map[int64]struct{}
	next      int64 // the position when nothing is pending; 0: nothing read yet
	readAny   bool
	committed int64 // the position last committed; -1: none
}

func (m *offsetMarks) read(offset int64) {
	m.pending = append(m.pending, offset)
	m.readAny = true
}

func (m *offsetMarks) done(offset int64) {
	if len(m.pending) == 0 || offset < m.pending[0] {
		return
	}
	if offset != m.pending[0] {
		i := sort.Search(len(m.pending), func(i int) bool { return m.pending[i] >= offset })
		if i < len(m.pending) && m.pending[i] == offset {
			if m.doneAhead == nil {
				m.doneAhead = map[int64]struct{}{}
			}
			m.doneAhead[offset] = struct{}{}
		}
		return
	}
	m.next = offset + 1
	m.pending = m.pending[1:]
	for len(m.pending) > 0 {
		o := m.pending[0]
		if _, ok := m.doneAhead[o]; !ok {
			break
		}
		delete(m.doneAhead, o)
		m.next = o + 1
		m.pending = m.pending[1:]
	}
	if len(m.pending) == 0 {
		m.pending = nil // let the backing array go
	}
}

// position is the offset to commit, and whether there is one (nothing read:
// none).
func (m *offsetMarks) position() (int64, bool) {
	switch {
	case len(m.pending) > 0:
		return m.pending[0], true
	case m.readAny:
		return m.next, true
	}
	return 0, false
}
