//go:build integration

package kafkaio_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/lag"
)

// TestHangWatchAbortsAHangingTransactionApacheKafka makes a genuinely
// hanging transaction on a real broker, as a broker restart under load
// left one in the chaos test: a producer's transactional records on a
// partition that its coordinator does not know of (the coordinator lists
// the transactional id Empty), so no marker will ever come. With the
// broker's partition verification (KIP-890) turned off for the test, a
// transactional Produce without AddPartitionsToTxn writes them, as a
// coordinator that lost the partition would have. Beside it, partition 1
// holds a live transaction (a producer that added the partition, Ongoing
// at its coordinator) open as long. The watch, given the TxnAborter,
// aborts partition 0's (its last stable offset reaches the high watermark)
// and leaves partition 1's alone. The live one is the forgotten one's
// transactional id initialised again (so the same producer id), as in the
// chaos failure, where a restarted router's lane got the id back: the
// coordinator has that producer's transaction in progress, but not on
// partition 0.
func TestHangWatchAbortsAHangingTransactionApacheKafka(t *testing.T) {
	bootstrap := os.Getenv("KAFKA_BOOTSTRAP")
	if bootstrap == "" {
		t.Fatal("KAFKA_BOOTSTRAP is not set: run 'make test-integration'")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	topic := "hangabort." + hex.EncodeToString(b)

	// Produce v11 and older: the classic (KIP-890 part 1) transactional
	// protocol, in which the broker verifies the partition with the
	// coordinator, or not at all when verification is off.
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.MaxVersions(kversion.V3_9_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, 2, 1
	create.Topics = append(create.Topics, ct)
	create.TimeoutMillis = 30_000
	if resp, err := create.RequestWith(ctx, cl); err != nil || kerr.ErrorForCode(resp.Topics[0].ErrorCode) != nil {
		t.Fatalf("creating %s: %v %v", topic, err, resp)
	}

	setVerification(ctx, t, cl, false)
	defer setVerification(context.Background(), t, cl, true)

	// The forgotten transaction: a producer id for a transactional id,
	// then its records on partition 0 with no AddPartitionsToTxn.
	initReq := kmsg.NewPtrInitProducerIDRequest()
	txID := topic + ".forgotten"
	initReq.TransactionalID, initReq.TransactionTimeoutMillis = &txID, 20_000
	init, err := initReq.RequestWith(ctx, cl)
	if err != nil || kerr.ErrorForCode(init.ErrorCode) != nil {
		t.Fatalf("InitProducerID: %v %v", err, init)
	}
	produce := kmsg.NewPtrProduceRequest()
	produce.TransactionID, produce.Acks, produce.TimeoutMillis = &txID, -1, 10_000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition = 0
	pp.Records = transactionalBatch(init.ProducerID, init.ProducerEpoch, time.Now(), 3)
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	presp, err := produce.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(presp.Topics[0].Partitions[0].ErrorCode); err != nil {
		t.Fatalf("producing the forgotten transaction's records: %v", err)
	}

	// The forgotten transaction also committed a group's offsets
	// (TxnOffsetCommit, no AddOffsetsToTxn): they stay pending on the
	// group's partition of __consumer_offsets, and an offset read that
	// requires them stable (a takeover's) fails there until that partition
	// is aborted too (aborting the data partition alone does not clear
	// it: tried by hand, 6 Dec 2026).
	group := topic + ".group"
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = txID, group, init.ProducerID, init.ProducerEpoch
	commit.Generation = -1
	ctp := kmsg.NewTxnOffsetCommitRequestTopic()
	ctp.Topic = topic
	cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset, cp.LeaderEpoch = 0, 3, -1
	ctp.Partitions = append(ctp.Partitions, cp)
	commit.Topics = append(commit.Topics, ctp)
	if resp, err := commit.RequestWith(ctx, cl); err != nil || kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode) != nil {
		t.Fatalf("committing the group's offsets in the forgotten transaction: %v %v", err, resp)
	}
	stableOffsets := func() error {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group, req.RequireStable = group, true
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := stableOffsets(); !errors.Is(err, kerr.UnstableOffsetCommit) {
		t.Fatalf("reading the group's offsets, stable: %v, want UNSTABLE_OFFSET_COMMIT", err)
	}

	// The live transaction on partition 1, open as long, by the same
	// transactional id initialised again, as a restarted router's lane
	// does: the same producer id, the next epoch, Ongoing at the
	// coordinator, but with partition 1 only.
	live, err := kafka.NewProducer(&kafka.ConfigMap{
		"bootstrap.servers": bootstrap, "transactional.id": txID, "enable.metrics.push": false,
		"transaction.timeout.ms": 600_000,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := live.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := live.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	delivered := make(chan kafka.Event, 1)
	if err := live.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 1}, Value: []byte{'x'}}, delivered); err != nil {
		t.Fatal(err)
	}
	if m, ok := (<-delivered).(*kafka.Message); !ok || m.TopicPartition.Error != nil {
		t.Fatalf("producing the live transaction's record: %v", m)
	}

	la, err := kafkaio.NewLagAdmin(kafkaio.Settings{Bootstrap: bootstrap})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = la.Close() }()
	la.Timeout = 30 * time.Second
	ends, err := la.Ends(ctx, []string{topic})
	if err != nil {
		t.Fatal(err)
	}
	if e := ends[topic]; e[0] != (lag.Ends{Stable: 0, High: 3}) || e[1] != (lag.Ends{Stable: 0, High: 1}) {
		t.Fatalf("ends %v, want both partitions held at 0 (high watermarks 3 and 1)", ends)
	}

	aborter, err := kafkaio.NewTxnAborter(kafkaio.Settings{Bootstrap: bootstrap})
	if err != nil {
		t.Fatal(err)
	}
	defer aborter.Close()
	defer func() { // a failed run leaves no hanging transaction on a shared broker's __consumer_offsets
		if !t.Failed() {
			return
		}
		for _, tp := range []struct {
			topic string
			p     int32
		}{{topic, 0}, {lag.OffsetsTopic, lag.OffsetsPartition(group, offsetsPartitions(context.Background(), t, la))}} {
			ps, _ := aborter.Producers(context.Background(), tp.topic, tp.p)
			for _, p := range ps {
				if p.ID == init.ProducerID && p.TxnStart >= 0 {
					_ = aborter.End(context.Background(), tp.topic, tp.p, p, false)
				}
			}
		}
	}()
	logs := &lockedBuffer{}
	w, err := lag.NewHangWatch(la, []string{topic}, lag.WithHangInterval(200*time.Millisecond), lag.WithHangAfter(2*time.Second), lag.WithHangAbortAfter(time.Second),
		lag.WithHangBootstrap(bootstrap), lag.WithHangAborter(aborter), lag.WithHangGroupOffsets(group), lag.WithHangLogger(slog.New(slog.NewTextHandler(logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer runHangWatch(ctx, t, w)()
	waitFor := func(what string, cond func() bool) { t.Helper(); waitLogged(t, logs, what, cond) }
	waitFor("the watch aborts the forgotten transaction", func() bool {
		return strings.Contains(logs.String(), "aborted the hanging transaction on "+topic+"[0]: producer ")
	})
	waitFor("the watch leaves the live transaction alone", func() bool {
		return strings.Contains(logs.String(), fmt.Sprintf("not ending the hanging transaction on %s[1] (offset 0): a transaction coordinator has producer %d's transaction on it in progress", topic, init.ProducerID))
	})
	if ends, err = la.Ends(ctx, []string{topic}); err != nil {
		t.Fatal(err)
	}
	if e := ends[topic]; e[0].Stable < 3 || e[0].Stable != e[0].High || e[1] != (lag.Ends{Stable: 0, High: 1}) {
		t.Fatalf("ends after the abort %v: want partition 0's stable offset at its high watermark (past 3), partition 1 still held at 0", ends)
	}
	waitFor("the watch aborts the forgotten transaction's offset commit", func() bool {
		return strings.Contains(logs.String(), fmt.Sprintf("aborted the hanging transaction on __consumer_offsets[%d]: producer %d ",
			lag.OffsetsPartition(group, offsetsPartitions(ctx, t, la)), init.ProducerID))
	})
	waitFor("the group's offsets are stable", func() bool { return stableOffsets() == nil })
	if strings.Contains(logs.String(), "aborted the hanging transaction on "+topic+"[1]") {
		t.Fatalf("the live transaction was aborted; logs:\n%s", logs.String())
	}
	// The live producer is unharmed: it commits.
	if err := live.CommitTransaction(ctx); err != nil {
		t.Fatalf("the live transaction does not commit: %v", err)
	}
	waitFor("the live transaction's partition is stable", func() bool {
		e, err := la.Ends(ctx, []string{topic})
		return err == nil && e[topic][1].Stable == e[topic][1].High
	})
}

// offsetsPartitions is how many partitions __consumer_offsets has.
func offsetsPartitions(ctx context.Context, t *testing.T, la *kafkaio.LagAdmin) int {
	t.Helper()
	ends, err := la.Ends(ctx, []string{lag.OffsetsTopic})
	if err != nil || len(ends[lag.OffsetsTopic]) == 0 {
		t.Fatalf("the ends of %s: %v %v", lag.OffsetsTopic, ends, err)
	}
	return len(ends[lag.OffsetsTopic])
}

// setVerification sets the brokers' transaction.partition.verification.enable
// (cluster-wide default) and waits until the broker describes it so.
func setVerification(ctx context.Context, t *testing.T, cl *kgo.Client, on bool) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, ""
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name = "transaction.partition.verification.enable"
	if on {
		c.Op = kmsg.IncrementalAlterConfigOpDelete // back to the static default
	} else {
		v := "false"
		c.Op, c.Value = kmsg.IncrementalAlterConfigOpSet, &v
	}
	r.Configs = append(r.Configs, c)
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || kerr.ErrorForCode(resp.Resources[0].ErrorCode) != nil {
		t.Fatalf("setting transaction.partition.verification.enable: %v %v", err, resp)
	}
	want := "true"
	if !on {
		want = "false"
	}
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for {
		meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err == nil && len(meta.Brokers) > 0 {
			d := kmsg.NewPtrDescribeConfigsRequest()
			dr := kmsg.NewDescribeConfigsRequestResource()
			dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(meta.Brokers[0].NodeID))
			dr.ConfigNames = []string{c.Name}
			d.Resources = append(d.Resources, dr)
			if dresp, err := d.RequestWith(ctx, cl); err == nil && len(dresp.Resources) == 1 && len(dresp.Resources[0].Configs) == 1 {
				if v := dresp.Resources[0].Configs[0].Value; v != nil && *v == want {
					return
				}
			}
		}
		select {
		case <-deadline.C:
			t.Fatalf("the broker does not describe %s=%s within 30s", c.Name, want)
		case <-poll.C:
		}
	}
}

// transactionalBatch is a v2 record batch of n one-byte records with the
// transactional attribute, from producer id at epoch, sequence 0.
func transactionalBatch(id int64, epoch int16, at time.Time, n int) []byte {
	var records []byte
	for i := range n {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte{'x'}}
		body := r.AppendTo(nil)[1:] // encoded with Length 0, one varint byte
		r.Length = int32(len(body))
		records = r.AppendTo(records)
	}
	ms := at.UnixMilli()
	batch := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: 0x10, // transactional
		LastOffsetDelta: int32(n - 1), FirstTimestamp: ms, MaxTimestamp: ms,
		ProducerID: id, ProducerEpoch: epoch, FirstSequence: 0, NumRecords: int32(n), Records: records,
	}
	raw := batch.AppendTo(nil)
	batch.Length = int32(len(raw) - 12)
	raw = batch.AppendTo(nil)
	crc := crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))
	raw[17], raw[18], raw[19], raw[20] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
	return raw
}
