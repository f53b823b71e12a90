package kafkaio

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/switchboard-mcp/switchboard/router/lag"
)

// franzLag asks the lag Sampler's and the HangWatch's questions (groups,
// committed offsets, partitions' extents and ends) with franz-go's admin
// client. librdkafka's admin client aborts the whole process on these
// requests when they time out while a broker restarts
// (rd_kafka_enq_once_del_source_return: "Assertion `eonce->refcnt > 0'
// failed", librdkafka#4605 and #3663, open in v2.11.1): in a three-broker
// drill both routers died of it during the broker kill. A router must
// outlive its brokers' restarts, so these reads go through a pure-Go
// client; the Kafka clients that carry intents stay librdkafka's.
type franzLag struct {
	cl  *kgo.Client
	adm *kadm.Client
}

// newFranzLag builds the client from s with the transaction aborter's
// translation of librdkafka's properties (franzOptions). It connects
// lazily.
func newFranzLag(s Settings) (*franzLag, error) {
	opts, err := franzOptions(s)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: the lag reader's client: %w", err)
	}
	return &franzLag{cl: cl, adm: kadm.NewClient(cl)}, nil
}

func (f *franzLag) close() { f.cl.Close() }

// describeGroups is LagAdmin.DescribeGroups. A group the coordinator does
// not know is StateMissing, whether it says so with an error
// (GROUP_ID_NOT_FOUND, the KIP-848 coordinator) or with the state Dead
// (the classic one).
func (f *franzLag) describeGroups(ctx context.Context, ids []string) (map[string]lag.GroupInfo, error) {
	res, err := f.adm.DescribeGroups(ctx, ids...)
	if err != nil && len(res) == 0 {
		return nil, fmt.Errorf("kafkaio: describing consumer groups: %w", err)
	}
	out := make(map[string]lag.GroupInfo, len(ids))
	for _, id := range ids {
		d, ok := res[id]
		switch {
		case !ok:
			return nil, fmt.Errorf("kafkaio: describing consumer group %s: no answer (%v)", id, err)
		case errors.Is(d.Err, kerr.GroupIDNotFound):
			out[id] = lag.GroupInfo{State: lag.StateMissing}
			continue
		case d.Err != nil:
			return nil, fmt.Errorf("kafkaio: describing consumer group %s: %w", id, d.Err)
		}
		info := lag.GroupInfo{Members: len(d.Members)}
		switch d.State {
		case "Stable":
			info.State = lag.StateStable
		case "Empty":
			info.State = lag.StateEmpty
		case "PreparingRebalance", "CompletingRebalance":
			info.State = lag.StateRebalancing
		case "Dead":
			info.State = lag.StateMissing
		default:
			info.State = lag.StateRebalancing // KIP-848's Assigning and Reconciling
		}
		out[id] = info
	}
	return out, nil
}

// committed is LagAdmin.Committed: the group's committed offsets of
// topic's partitions (OffsetFetch to the group's coordinator); a partition
// without one is left out.
func (f *franzLag) committed(ctx context.Context, groupID, topic string, partitions []int32) (map[int32]int64, error) {
	res, err := f.adm.FetchOffsetsForTopics(ctx, groupID, topic)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: reading the committed offsets of group %s: %w", groupID, err)
	}
	out := map[int32]int64{}
	for _, p := range partitions {
		o, ok := res.Lookup(topic, p)
		switch {
		case !ok:
			continue
		case o.Err != nil:
			return nil, fmt.Errorf("kafkaio: the committed offset of group %s on %s[%d]: %w", groupID, topic, p, o.Err)
		case o.At >= 0:
			out[p] = o.At
		}
	}
	return out, nil
}

// listed reads one kind of offset of topics' partitions; a topic that does
// not exist is left out (kadm answers it as partition -1 with
// UNKNOWN_TOPIC_OR_PARTITION).
func listed(ctx context.Context, what string, topics []string, list func(context.Context, ...string) (kadm.ListedOffsets, error)) (map[string]map[int32]int64, error) {
	res, err := list(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: listing the %s of %v: %w", what, topics, err)
	}
	out := map[string]map[int32]int64{}
	for topic, ps := range res {
		for p, o := range ps {
			switch {
			case p < 0 && errors.Is(o.Err, kerr.UnknownTopicOrPartition):
				continue
			case o.Err != nil:
				return nil, fmt.Errorf("kafkaio: the %s of %s[%d]: %w", what, topic, p, o.Err)
			}
			if out[topic] == nil {
				out[topic] = map[int32]int64{}
			}
			out[topic][p] = o.Offset
		}
	}
	return out, nil
}

// extents is LagAdmin.Extents: each partition's first offset and last
// stable offset (read_committed).
func (f *franzLag) extents(ctx context.Context, topics []string) (map[string]map[int32]lag.Extent, error) {
	starts, err := listed(ctx, "first offsets", topics, f.adm.ListStartOffsets)
	if err != nil {
		return nil, err
	}
	ends, err := listed(ctx, "last stable offsets", topics, f.adm.ListCommittedOffsets)
	if err != nil {
		return nil, err
	}
	return joined(ends, starts, "first offset", func(end, start int64) lag.Extent { return lag.Extent{Start: start, End: end} })
}

// ends is LagAdmin.Ends: each partition's last stable offset and high
// watermark.
func (f *franzLag) ends(ctx context.Context, topics []string) (map[string]map[int32]lag.Ends, error) {
	stable, err := listed(ctx, "last stable offsets", topics, f.adm.ListCommittedOffsets)
	if err != nil {
		return nil, err
	}
	high, err := listed(ctx, "high watermarks", topics, f.adm.ListEndOffsets)
	if err != nil {
		return nil, err
	}
	return joined(stable, high, "high watermark", func(s, h int64) lag.Ends { return lag.Ends{Stable: s, High: h} })
}

// joined pairs each partition of a with the same partition of b (missing
// names b's offset when b lacks one).
func joined[T any](a, b map[string]map[int32]int64, missing string, pair func(x, y int64) T) (map[string]map[int32]T, error) {
	out := map[string]map[int32]T{}
	for topic, ps := range a {
		for p, x := range ps {
			y, ok := b[topic][p]
			if !ok {
				return nil, fmt.Errorf("kafkaio: no %s for %s[%d]", missing, topic, p)
			}
			if out[topic] == nil {
				out[topic] = map[int32]T{}
			}
			out[topic][p] = pair(x, y)
		}
	}
	return out, nil
}
