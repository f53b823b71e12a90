//go:build integration && linux

package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// drillLoad publishes the drill's load with franz-go's idempotent producer
// rather than librdkafka's. librdkafka's (v2.11.1, the newest
// confluent-kafka-go here) busy-loops its broker threads while a broker is
// away: rd_kafka_toppar_producer_serve sets the thread's next wakeup to
// "now" for a partition with queued records before it finds the partition's
// five in-flight requests (the idempotence window) still waiting for
// acks=all, so the thread polls with a zero timeout until they are answered.
// In the drill that took both of this 2-core host's cores for the length of
// each broker outage (perf: rd_kafka_toppar_producer_serve, clock_gettime,
// poll in the test binary's rdk:broker threads), starving the routers under
// test. The records are the same as client.Publisher's: the intent's id as
// the key, partitioned as Kafka's Java client and librdkafka's
// murmur2_random do (router.PartitionFor), acks from all in-sync replicas.
type drillLoad struct {
	cl    *kgo.Client
	codec *schemas.Codec
	topic string
}

func newDrillLoad(bootstrap string, codec *schemas.Codec, topic string, deliverWithin time.Duration) (*drillLoad, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(bootstrap, ",")...),
		kgo.ClientID("switchboard-drill-load"),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(deliverWithin),
		kgo.MaxBufferedRecords(1<<20),
	)
	if err != nil {
		return nil, fmt.Errorf("drill load: %w", err)
	}
	return &drillLoad{cl: cl, codec: codec, topic: topic}, nil
}

// Publish returns once the broker acknowledged req.
func (d *drillLoad) Publish(ctx context.Context, req *schemas.IntentRequest) error {
	value, err := d.codec.Encode(d.topic, req)
	if err != nil {
		return err
	}
	return d.cl.ProduceSync(ctx, &kgo.Record{Key: []byte(req.IntentID), Value: value}).FirstErr()
}

func (d *drillLoad) Close() { d.cl.Close() }

// The drill's load lands where client.Publisher's would: franz-go's
// partitioner with its default hasher and router.PartitionFor agree, so the
// router never moves a drill request to its right partition.
func TestDrillLoadPartitionsAsTheRouter(t *testing.T) {
	part := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for i := range 2000 {
		key := []byte(intents.NewID())
		if i%2 == 1 {
			key = []byte(fmt.Sprintf("k%d", i))
		}
		for _, n := range []int32{1, 6, 7, 64} {
			if got, want := int32(part.Partition(&kgo.Record{Key: key}, int(n))), router.PartitionFor(key, n); got != want {
				t.Fatalf("key %q over %d partitions: franz-go %d, router %d", key, n, got, want)
			}
		}
	}
}
