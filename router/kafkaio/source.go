package kafkaio

import (
	"fmt"
	"strconv"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/lag"
	"github.com/switchboard-mcp/switchboard/router/port"
)

// Source is the router's consumer: a member of the router's consumer group
// subscribed to the requests and responses topics together, with the range
// assignor so that the same partition number of both topics goes to the same
// instance.
type Source struct {
	c        *consumer
	topics   []string
	stats    func(string)
	queued   []any // rebalance events raised inside Poll, returned by the next Polls
	onRevoke func([]port.TopicPartition, bool)
	onStats  func(lag.ConsumerStats)
}

var _ port.Source = (*Source)(nil)

// SourceOptions are the router's choices for its consumer.
type SourceOptions struct {
	// InstanceID, when set, is the consumer's group.instance.id: static
	// membership, so a restarted instance gets its partitions back at once.
	InstanceID string
	// Transactional: offsets are committed by a transactional producer
	// (exactly_once), never by the consumer.
	Transactional bool
	// StatsInterval, when positive, is how often the client reports its
	// statistics (statistics.interval.ms), which OnConsumerStats hears of.
	StatsInterval time.Duration
	// PrefetchBytes bounds what librdkafka prefetches (prefetchBuffers);
	// 0: 16 MiB.
	PrefetchBytes int64
}

// NewSource joins groupID and subscribes to topics.
func NewSource(s Settings, groupID string, topics []string, o SourceOptions) (*Source, error) {
	c, err := newConsumer(s, "consumer", sourceConfig(s, groupID, o))
	if err != nil {
		return nil, err
	}
	c.group = groupID
	src := &Source{c: c, topics: topics, stats: s.Stats}
	if err := c.SubscribeTopics(topics, src.rebalance); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("kafkaio: subscribing to %v: %w", topics, err)
	}
	return src, nil
}

// prefetchBuffers bound what librdkafka prefetches for a consumer to n
// bytes: by default it queues up to 64 MiB (queued.max.messages.kbytes) and
// fetches up to 50 MB at once (fetch.max.bytes), which with records of
// 1 MiB is memory no byte budget in Go sees. The router's consumer gets
// 16 MiB (a dozen such records ready for the loop) unless
// router.memory_limit_bytes scales it (config.Memory); kafka.properties
// wins over both.
func prefetchBuffers(n int64) kafka.ConfigMap {
	return kafka.ConfigMap{"queued.max.messages.kbytes": int(max(n>>10, 1)), "fetch.max.bytes": int(n)}
}

// withPrefetch adds prefetchBuffers(n) to owned, except for the settings
// kafka.properties sets; n is at least kafka.properties' message.max.bytes
// (librdkafka refuses a fetch.max.bytes below it).
func withPrefetch(s Settings, owned kafka.ConfigMap, n int64) {
	if m, err := strconv.ParseInt(s.Properties["message.max.bytes"], 10, 64); err == nil && m > n {
		n = m
	}
	for k, v := range prefetchBuffers(n) {
		if _, set := s.Properties[k]; !set {
			owned[k] = v
		}
	}
}

// sourceConfig is the router consumer's configuration (besides the
// pass-through properties).
func sourceConfig(s Settings, groupID string, o SourceOptions) kafka.ConfigMap {
	owned := kafka.ConfigMap{
		"group.id":                      groupID,
		"partition.assignment.strategy": "range",
		"enable.auto.commit":            !o.Transactional,
		"enable.auto.offset.store":      false,
		"auto.offset.reset":             "earliest",
		"isolation.level":               "read_committed",
		"enable.partition.eof":          true,
	}
	if o.InstanceID != "" {
		owned["group.instance.id"] = o.InstanceID
	}
	if o.StatsInterval > 0 {
		ms := int(max(o.StatsInterval.Milliseconds(), 1))
		// A shorter interval asked for in Properties (bench's broker
		// counters, Settings.Stats) wins: both hooks hear every report.
		if v, err := strconv.Atoi(s.Properties["statistics.interval.ms"]); err == nil && v > 0 && v < ms {
			ms = v
		}
		owned["statistics.interval.ms"] = ms
	}
	prefetch := o.PrefetchBytes
	if prefetch <= 0 {
		prefetch = config.DefaultPrefetchBytes
	}
	withPrefetch(s, owned, prefetch)
	return owned
}

// rebalance runs inside Poll. It lets the client revoke as usual and
// queues the event for the router. An assignment it makes itself, then
// resumes the partitions: librdkafka keeps an application's pause on a
// partition across its revocation and reassignment to the same client
// (confluent-kafka-go#193), while a port.Source's newly assigned partitions
// are not paused (the router forgets its pauses with the revocation). The
// router pauses every partition while its loop is behind, so under load a
// rebalance that gave a partition back left it unfetched for good (the
// three-broker drill at 500/s, after a router's kill).
func (s *Source) rebalance(_ *kafka.Consumer, ev kafka.Event) error {
	switch e := ev.(type) {
	case kafka.AssignedPartitions:
		var err error
		if s.c.GetRebalanceProtocol() == "COOPERATIVE" { // group.protocol=consumer in kafka.properties
			err = s.c.IncrementalAssign(e.Partitions)
		} else {
			err = s.c.Assign(e.Partitions)
		}
		if err == nil && len(e.Partitions) > 0 {
			err = s.c.Resume(e.Partitions)
		}
		s.queued = append(s.queued, port.Assigned(fromKafka(e.Partitions)))
		if err != nil { // the consumer's state is not what the router is told: replace it
			s.queued = append(s.queued, &port.FatalError{Err: fmt.Errorf("kafkaio: taking the assigned partitions: %w", err)})
		}
	case kafka.RevokedPartitions:
		tps := fromKafka(e.Partitions)
		if s.onRevoke != nil {
			s.onRevoke(tps, s.c.AssignmentLost()) // before the partitions are given up
		}
		s.queued = append(s.queued, port.Revoked(tps))
	}
	return nil
}

// OnRevoke implements port.Source.
func (s *Source) OnRevoke(f func([]port.TopicPartition, bool)) { s.onRevoke = f }

// OnConsumerStats makes f hear of the consumer's lag and rebalances every
// SourceOptions.StatsInterval; f runs on the goroutine that polls, and must
// be quick. Call it before the first Poll.
func (s *Source) OnConsumerStats(f func(lag.ConsumerStats)) { s.onStats = f }

// AssignmentLost implements port.Source.
func (s *Source) AssignmentLost() bool { return s.c.AssignmentLost() }

// Committed implements port.Source.
func (s *Source) Committed(tps []port.TopicPartition) (map[port.TopicPartition]int64, error) {
	res, err := s.c.Committed(toKafka(tps), 10000)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: reading committed offsets: %w", err)
	}
	out := make(map[port.TopicPartition]int64, len(res))
	for _, p := range res {
		if p.Offset >= 0 {
			out[port.TopicPartition{Topic: *p.Topic, Partition: p.Partition}] = int64(p.Offset)
		}
	}
	return out, nil
}

// Seek implements port.Source. When it returns, no record fetched before
// it will be returned by Poll.
func (s *Source) Seek(tp port.TopicPartition, offset int64) error {
	res, err := s.c.SeekPartitions([]kafka.TopicPartition{{Topic: &tp.Topic, Partition: tp.Partition, Offset: kafka.Offset(offset)}})
	if err != nil {
		return fmt.Errorf("kafkaio: seeking %s[%d] to %d: %w", tp.Topic, tp.Partition, offset, err)
	}
	for _, p := range res {
		if p.Error != nil {
			return fmt.Errorf("kafkaio: seeking %s[%d] to %d: %w", tp.Topic, tp.Partition, offset, p.Error)
		}
	}
	return nil
}

// GroupMetadata implements port.Source.
func (s *Source) GroupMetadata() (any, error) { return s.c.GetConsumerGroupMetadata() }

// Poll implements port.Source.
func (s *Source) Poll(timeoutMs int) any {
	if ev := s.pop(); ev != nil {
		return ev
	}
	switch e := s.c.Poll(timeoutMs).(type) {
	case *kafka.Message:
		if e.TopicPartition.Error != nil {
			return e.TopicPartition.Error
		}
		return recordOf(e)
	case kafka.PartitionEOF:
		if e.Topic != nil {
			return port.EndOfPartition{Topic: *e.Topic, Partition: e.Partition}
		}
	case kafka.Error:
		if e.IsFatal() {
			return &port.FatalError{Err: e}
		}
		// A refusal (credentials, certificate, a missing ACL) in one line;
		// like any other error here the router logs it and polls on.
		if err := s.c.denial(e, s.topics); err != nil {
			return err
		}
		return e
	case *kafka.Stats:
		if s.onStats != nil {
			if st, err := parseConsumerStats(e.String()); err == nil {
				s.onStats(st)
			}
		}
		if s.stats != nil {
			s.stats(e.String())
		}
	}
	return s.pop()
}

func (s *Source) pop() any {
	if len(s.queued) == 0 {
		return nil
	}
	ev := s.queued[0]
	s.queued[0] = nil
	s.queued = s.queued[1:]
	return ev
}

// StoreOffset implements port.Source.
func (s *Source) StoreOffset(tp port.TopicPartition, next int64) error {
	_, err := s.c.StoreOffsets([]kafka.TopicPartition{{Topic: &tp.Topic, Partition: tp.Partition, Offset: kafka.Offset(next)}})
	return err
}

// Pause implements port.Source.
func (s *Source) Pause(tps []port.TopicPartition) error { return s.c.Pause(toKafka(tps)) }

// Resume implements port.Source.
func (s *Source) Resume(tps []port.TopicPartition) error { return s.c.Resume(toKafka(tps)) }

// Close commits the stored offsets and leaves the group.
//
// A consumer that hit a fatal error (a static member fenced, say) may never
// finish closing; Close gives up after closeTimeout so the process can go on
// (and a supervisor, or the caller, start a new one).
func (s *Source) Close() error {
	done := make(chan error, 1)
	go func() { done <- s.c.Close() }()
	select {
	case err := <-done:
		return err
	case <-closeClock.After(closeTimeout):
		return fmt.Errorf("kafkaio: the consumer did not close within %s; abandoned", closeTimeout)
	}
}

// closeTimeout bounds Source.Close.
const closeTimeout = 20 * time.Second

// closeClock paces Close's timeout.
var closeClock = clockwork.NewRealClock()

func fromKafka(ps []kafka.TopicPartition) []port.TopicPartition {
	out := make([]port.TopicPartition, len(ps))
	for i, p := range ps {
		out[i] = port.TopicPartition{Topic: *p.Topic, Partition: p.Partition}
	}
	return out
}

func toKafka(tps []port.TopicPartition) []kafka.TopicPartition {
	out := make([]kafka.TopicPartition, len(tps))
	for i := range tps {
		out[i] = kafka.TopicPartition{Topic: &tps[i].Topic, Partition: tps[i].Partition}
	}
	return out
}

// recordOf is a consumed message as the router sees it. It shares the
// message's key, value and header values.
func recordOf(m *kafka.Message) *port.Record {
	rec := &port.Record{
		Topic:     *m.TopicPartition.Topic,
		Partition: m.TopicPartition.Partition,
		Offset:    int64(m.TopicPartition.Offset),
		Key:       m.Key,
		Value:     m.Value,
	}
	if m.TimestampType != kafka.TimestampNotAvailable {
		rec.TimestampMs = m.Timestamp.UnixMilli()
	}
	if len(m.Headers) > 0 {
		rec.Headers = make([]port.Header, len(m.Headers))
		for i, h := range m.Headers {
			rec.Headers[i] = port.Header{Key: h.Key, Value: h.Value}
		}
	}
	return rec
}
