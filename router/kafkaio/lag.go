package kafkaio

import (
	"context"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/lag"
)

// LagAdmin answers the lag Sampler's questions with an admin client and a
// reader that joins no group (it reads one record per lagging partition to
// date the oldest unconsumed request). Create it with NewLagAdmin and Close
// it when the Sampler has stopped; its methods are called from one
// goroutine at a time.
type LagAdmin struct {
	a *admin
	r *consumer
	// f asks the group and offset questions when franz-go can speak the
	// settings (see franzLag: librdkafka's admin client can abort the
	// process on them while a broker restarts); a nil f leaves them to a.
	f *franzLag
	// Timeout bounds each admin request; ReadTimeout bounds the reading of
	// FirstTimestamps.
	Timeout, ReadTimeout time.Duration
}

var _ lag.Admin = (*LagAdmin)(nil)

// NewLagAdmin connects an admin client and the reader.
func NewLagAdmin(s Settings) (*LagAdmin, error) {
	a, err := newAdmin(s)
	if err != nil {
		return nil, err
	}
	// One record per partition is all it needs: fetch little, queue little.
	r, err := newReader(s, "lag", true, kafka.ConfigMap{
		"fetch.message.max.bytes":    4096,
		"queued.min.messages":        1,
		"queued.max.messages.kbytes": 64,
		"fetch.queue.backoff.ms":     1, // the default (1 s) would hold the next read of a partition it read
	})
	if err != nil {
		a.Close()
		return nil, err
	}
	l := &LagAdmin{a: a, r: r, Timeout: 10 * time.Second, ReadTimeout: 3 * time.Second}
	if f, err := newFranzLag(s); err == nil {
		l.f = f
	}
	return l, nil
}

// Close closes the reader and the admin client.
func (l *LagAdmin) Close() error {
	err := l.r.Close()
	l.a.Close()
	if l.f != nil {
		l.f.close()
	}
	return err
}

// DescribeGroups implements lag.Admin.
func (l *LagAdmin) DescribeGroups(ctx context.Context, ids []string) (map[string]lag.GroupInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, l.Timeout)
	defer cancel()
	if l.f != nil {
		return l.f.describeGroups(ctx, ids)
	}
	res, err := l.a.DescribeConsumerGroups(ctx, ids, kafka.SetAdminRequestTimeout(l.Timeout))
	if err != nil {
		return nil, fmt.Errorf("kafkaio: describing consumer groups: %w", err)
	}
	out := make(map[string]lag.GroupInfo, len(ids))
	for _, d := range res.ConsumerGroupDescriptions {
		switch d.Error.Code() {
		case kafka.ErrNoError:
		case kafka.ErrGroupIDNotFound:
			out[d.GroupID] = lag.GroupInfo{State: lag.StateMissing}
			continue
		default:
			return nil, fmt.Errorf("kafkaio: describing consumer group %s: %w", d.GroupID, d.Error)
		}
		info := lag.GroupInfo{Members: len(d.Members)}
		switch d.State {
		case kafka.ConsumerGroupStateStable:
			info.State = lag.StateStable
		case kafka.ConsumerGroupStateEmpty:
			info.State = lag.StateEmpty
		case kafka.ConsumerGroupStatePreparingRebalance, kafka.ConsumerGroupStateCompletingRebalance:
			info.State = lag.StateRebalancing
		case kafka.ConsumerGroupStateDead:
			info.State = lag.StateMissing // what a classic broker says of a group it does not know
		default:
			info.State = lag.StateRebalancing // KIP-848's assigning and reconciling
		}
		out[d.GroupID] = info
	}
	return out, nil
}

// Extents implements lag.Admin: a topic that does not exist is left out.
// The ends are the last stable offsets (read_committed).
func (l *LagAdmin) Extents(ctx context.Context, topics []string) (map[string]map[int32]lag.Extent, error) {
	ctx, cancel := context.WithTimeout(ctx, l.Timeout)
	defer cancel()
	if l.f != nil {
		return l.f.extents(ctx, topics)
	}
	desc, err := l.a.DescribeTopics(ctx, kafka.NewTopicCollectionOfTopicNames(topics), kafka.SetAdminRequestTimeout(l.Timeout))
	if err != nil {
		return nil, fmt.Errorf("kafkaio: describing topics %v: %w", topics, err)
	}
	earliest, latest := map[kafka.TopicPartition]kafka.OffsetSpec{}, map[kafka.TopicPartition]kafka.OffsetSpec{}
	for _, td := range desc.TopicDescriptions {
		switch td.Error.Code() {
		case kafka.ErrNoError:
		case kafka.ErrUnknownTopicOrPart, kafka.ErrUnknownTopic:
			continue
		default:
			return nil, fmt.Errorf("kafkaio: describing topic %s: %w", td.Name, td.Error)
		}
		for _, p := range td.Partitions {
			topic := td.Name
			tp := kafka.TopicPartition{Topic: &topic, Partition: int32(p.Partition)}
			earliest[tp], latest[tp] = kafka.EarliestOffsetSpec, kafka.LatestOffsetSpec
		}
	}
	out := map[string]map[int32]lag.Extent{}
	if len(earliest) == 0 {
		return out, nil
	}
	iso := kafka.SetAdminIsolationLevel(kafka.IsolationLevelReadCommitted)
	starts, err := l.a.ListOffsets(ctx, earliest, iso, kafka.SetAdminRequestTimeout(l.Timeout))
	if err != nil {
		return nil, fmt.Errorf("kafkaio: listing the first offsets of %v: %w", topics, err)
	}
	ends, err := l.a.ListOffsets(ctx, latest, iso, kafka.SetAdminRequestTimeout(l.Timeout))
	if err != nil {
		return nil, fmt.Errorf("kafkaio: listing the end offsets of %v: %w", topics, err)
	}
	// ResultInfos are keyed by TopicPartition, whose Topic is a pointer:
	// match the two answers by name and number.
	type key struct {
		topic string
		p     int32
	}
	first := make(map[key]kafka.ListOffsetsResultInfo, len(starts.ResultInfos))
	for tp, s := range starts.ResultInfos {
		first[key{*tp.Topic, tp.Partition}] = s
	}
	for tp, e := range ends.ResultInfos {
		s, ok := first[key{*tp.Topic, tp.Partition}]
		switch {
		case e.Error.Code() != kafka.ErrNoError:
			return nil, fmt.Errorf("kafkaio: the end offset of %s[%d]: %w", *tp.Topic, tp.Partition, e.Error)
		case !ok:
			return nil, fmt.Errorf("kafkaio: no first offset for %s[%d]", *tp.Topic, tp.Partition)
		case s.Error.Code() != kafka.ErrNoError:
			return nil, fmt.Errorf("kafkaio: the first offset of %s[%d]: %w", *tp.Topic, tp.Partition, s.Error)
		}
		if out[*tp.Topic] == nil {
			out[*tp.Topic] = map[int32]lag.Extent{}
		}
		out[*tp.Topic][tp.Partition] = lag.Extent{Start: int64(s.Offset), End: int64(e.Offset)}
	}
	return out, nil
}

// Committed implements lag.Admin.
func (l *LagAdmin) Committed(ctx context.Context, groupID, topic string, partitions []int32) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, l.Timeout)
	defer cancel()
	if l.f != nil {
		return l.f.committed(ctx, groupID, topic, partitions)
	}
	tps := make([]kafka.TopicPartition, len(partitions))
	for i, p := range partitions {
		tps[i] = kafka.TopicPartition{Topic: &topic, Partition: p}
	}
	res, err := l.a.ListConsumerGroupOffsets(ctx, []kafka.ConsumerGroupTopicPartitions{{Group: groupID, Partitions: tps}},
		kafka.SetAdminRequestTimeout(l.Timeout))
	if err != nil {
		return nil, fmt.Errorf("kafkaio: reading the committed offsets of group %s: %w", groupID, err)
	}
	out := map[int32]int64{}
	for _, g := range res.ConsumerGroupsTopicPartitions {
		for _, tp := range g.Partitions {
			if tp.Error != nil {
				return nil, fmt.Errorf("kafkaio: the committed offset of group %s on %s[%d]: %w", groupID, topic, tp.Partition, tp.Error)
			}
			if tp.Offset >= 0 {
				out[tp.Partition] = int64(tp.Offset)
			}
		}
	}
	return out, nil
}

// FirstTimestamps implements lag.Admin: it assigns the reader the
// partitions at the offsets asked, reads until each has handed over a
// record or reached its end, or ReadTimeout passes, and unassigns them.
func (l *LagAdmin) FirstTimestamps(ctx context.Context, topic string, from map[int32]int64) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, l.ReadTimeout)
	defer cancel()
	assign := make([]kafka.TopicPartition, 0, len(from))
	for p, off := range from {
		assign = append(assign, kafka.TopicPartition{Topic: &topic, Partition: p, Offset: kafka.Offset(off)})
	}
	if err := l.r.Assign(assign); err != nil {
		return nil, fmt.Errorf("kafkaio: assigning %s for the lag's age: %w", topic, err)
	}
	defer func() { _ = l.r.Unassign() }()
	out := make(map[int32]int64, len(from))
	for len(out) < len(from) && ctx.Err() == nil {
		switch e := l.r.Poll(50).(type) {
		case *kafka.Message:
			tp := e.TopicPartition
			start, asked := from[tp.Partition]
			if tp.Error != nil || tp.Topic == nil || *tp.Topic != topic || !asked || int64(tp.Offset) < start {
				continue
			}
			if _, done := out[tp.Partition]; !done && e.TimestampType != kafka.TimestampNotAvailable {
				out[tp.Partition] = e.Timestamp.UnixMilli()
			}
		case kafka.PartitionEOF:
			if _, asked := from[e.Partition]; asked && e.Topic != nil && *e.Topic == topic {
				if _, done := out[e.Partition]; !done {
					out[e.Partition] = lag.NoRecord
				}
			}
		case kafka.Error:
			if e.IsFatal() {
				return out, fmt.Errorf("kafkaio: reading %s for the lag's age: %w", topic, e)
			}
		}
	}
	return out, nil
}
