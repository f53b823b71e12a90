package kafkaio_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/embedded"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/lag"
)

func TestLagAdminEmbedded(t *testing.T) {
	c, err := embedded.Start(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testLagAdmin(t, c.Bootstrap())
}

// testLagAdmin: a group that never joined is missing; one that committed
// and left is empty, with its committed offsets; the extents end at the last
// stable offset; the first timestamp at a committed offset is the record's,
// and a partition with only a commit marker left has NoRecord.
func testLagAdmin(t *testing.T, bootstrap string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	topic := "lag." + hex.EncodeToString(b)
	group := topic + ".agent"

	admin, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "enable.metrics.push": false})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	res, err := admin.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: topic, NumPartitions: 2, ReplicationFactor: 1}})
	if err != nil || res[0].Error.Code() != kafka.ErrNoError {
		t.Fatalf("creating %s: %v %v", topic, err, res)
	}

	// One transaction: five records on partition 0, three on partition 1,
	// stamped a minute apart from a known time.
	base := time.UnixMilli(time.Now().Add(-time.Hour).UnixMilli())
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "transactional.id": topic + ".tx", "enable.metrics.push": false})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for part, n := range []int{5, 3} {
		for i := range n {
			m := &kafka.Message{
				TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: int32(part)},
				Value:          []byte{'x'}, Timestamp: base.Add(time.Duration(i) * time.Minute),
			}
			if err := p.Produce(m, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}

	la, err := kafkaio.NewLagAdmin(kafkaio.Settings{Bootstrap: bootstrap})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = la.Close() }()
	la.ReadTimeout = 30 * time.Second // a busy host: the reads end as soon as each partition answers

	infos, err := la.DescribeGroups(ctx, []string{group})
	if err != nil {
		t.Fatal(err)
	}
	if infos[group].State != lag.StateMissing {
		t.Fatalf("a group nobody joined: %+v, want missing", infos[group])
	}

	// The agent's group commits offset 2 on partition 0 and everything (3
	// records) on partition 1, then leaves.
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "group.id": group, "enable.metrics.push": false})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CommitOffsets([]kafka.TopicPartition{{Topic: &topic, Partition: 0, Offset: 2}, {Topic: &topic, Partition: 1, Offset: 3}})
	_ = c.Close()
	if err != nil {
		t.Fatal(err)
	}

	infos, err = la.DescribeGroups(ctx, []string{group})
	if err != nil {
		t.Fatal(err)
	}
	if infos[group].State != lag.StateEmpty || infos[group].Members != 0 {
		t.Fatalf("a group with offsets and no member: %+v, want empty", infos[group])
	}
	ext, err := la.Extents(ctx, []string{topic, topic + ".nope"})
	if err != nil {
		t.Fatal(err)
	}
	// Each partition: its records, then the commit marker.
	if e := ext[topic]; len(e) != 2 || e[0] != (lag.Extent{Start: 0, End: 6}) || e[1] != (lag.Extent{Start: 0, End: 4}) {
		t.Fatalf("extents %v, want partition 0 [0, 6) and 1 [0, 4)", ext)
	}
	if _, ok := ext[topic+".nope"]; ok {
		t.Fatalf("a topic that does not exist has extents: %v", ext)
	}
	committed, err := la.Committed(ctx, group, topic, []int32{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(committed) != 2 || committed[0] != 2 || committed[1] != 3 {
		t.Fatalf("committed %v, want 0:2 1:3", committed)
	}
	ts, err := la.FirstTimestamps(ctx, topic, map[int32]int64{0: 2, 1: 3})
	if err != nil {
		t.Fatal(err)
	}
	if want := base.Add(2 * time.Minute).UnixMilli(); ts[0] != want || ts[1] != lag.NoRecord {
		t.Fatalf("first timestamps %v, want 0:%d (the third record) and 1:NoRecord (only the marker is left)", ts, want)
	}
	// Read again (the reader is reused): the same answer.
	if ts, err := la.FirstTimestamps(ctx, topic, map[int32]int64{0: 4}); err != nil || ts[0] != base.Add(4*time.Minute).UnixMilli() {
		t.Fatalf("second read: %v %v", ts, err)
	}
}
