//go:build integration

package kafkaio_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/lag"
)

// TestLeaderlessCommitIsCommittedThreeBrokers reproduces, on the drill's
// three-node cluster, how Kafka 4.4 forgets a committed transaction
// (KAFKA-20734), and shows that the hanging-transaction watch commits it:
// a librdkafka transactional producer writes a record to a partition whose
// only replica is on a node other than its transaction coordinator's; that
// node is stopped (the partition has no leader), the transaction commits,
// and the coordinator, unable to find a leader, skips the partition's
// marker as if it had been deleted and completes the transaction. With the
// node back the record stays open for good, its coordinator done with it.
// The watch reads the commit from the transaction log and writes the
// commit marker: a read_committed reader gets the record, which an abort
// (what the watch did before) would have discarded. make drill runs it.
func TestLeaderlessCommitIsCommittedThreeBrokers(t *testing.T) {
	if os.Getenv("SWITCHBOARD_DRILL") != "1" {
		t.Skip("SWITCHBOARD_DRILL is not 1: make drill starts a three-node cluster and runs this test")
	}
	bootstrap := os.Getenv("KAFKA_BOOTSTRAP")
	if strings.Count(bootstrap, ",") != 2 {
		t.Fatalf("KAFKA_BOOTSTRAP=%q: want the three brokers of 'kafka.sh cluster up'", bootstrap)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	node := func(ctx context.Context, verb string, n int32) {
		t.Helper()
		cmd := exec.CommandContext(ctx, "../../deploy/kafka/kafka.sh", "cluster", verb, strconv.Itoa(int(n)))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kafka.sh cluster %s %d: %v\n%s", verb, n, err, out)
		}
	}

	txnID := fmt.Sprintf("leaderless.%d", time.Now().UnixNano())
	pr, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "transactional.id": txnID, "enable.metrics.push": false})
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	if err := pr.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	fcl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer fcl.Close()
	adm := kadm.NewClient(fcl)
	dt, err := adm.DescribeTransactions(ctx, txnID)
	if err != nil || dt[txnID].Err != nil {
		t.Fatalf("describing %s: %v %v", txnID, err, dt)
	}
	coordinator := dt[txnID].Coordinator
	replica := coordinator%3 + 1 // another node
	topic := txnID
	admin, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "enable.metrics.push": false})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	res, err := admin.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: topic, NumPartitions: 1, ReplicaAssignment: [][]int32{{replica}}}})
	if err != nil || res[0].Error.Code() != kafka.ErrNoError {
		t.Fatalf("creating %s on node %d: %v %v", topic, replica, err, res)
	}
	t.Logf("transaction coordinator: node %d; %s[0]'s only replica: node %d", coordinator, topic, replica)

	if err := pr.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	dc := make(chan kafka.Event, 1)
	if err := pr.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Value: []byte("committed")}, dc); err != nil {
		t.Fatal(err)
	}
	if m, ok := (<-dc).(*kafka.Message); !ok || m.TopicPartition.Error != nil {
		t.Fatalf("the record was not delivered: %v", m)
	}
	node(ctx, "stop", replica) // controlled shutdown: the partition has no leader now
	t.Cleanup(func() {         // the cluster is left whole, as it was found
		cctx, ccancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer ccancel()
		node(cctx, "start", replica)
	})
	if err := pr.CommitTransaction(ctx); err != nil {
		t.Fatalf("the commit failed (the coordinator is up): %v", err)
	}
	node(ctx, "start", replica)
	t.Logf("node %d stopped, the transaction committed, node %d started again", replica, replica)

	la, err := kafkaio.NewLagAdmin(kafkaio.Settings{Bootstrap: bootstrap})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = la.Close() }()
	aborter, err := kafkaio.NewTxnAborter(kafkaio.Settings{Bootstrap: bootstrap})
	if err != nil {
		t.Fatal(err)
	}
	defer aborter.Close()
	logs := &lockedBuffer{}
	waitFor := func(what string, cond func() bool) { t.Helper(); waitLogged(t, logs, what, cond) }
	waitFor("the partition answers again, its transaction open", func() bool {
		e, err := la.Ends(ctx, []string{topic})
		return err == nil && e[topic][0] == lag.Ends{Stable: 0, High: 1}
	})
	if dt, err := adm.DescribeTransactions(ctx, txnID); err != nil || dt[txnID].State != "CompleteCommit" {
		t.Fatalf("the coordinator's state of %s: %v %v; want CompleteCommit, the markers counted as written", txnID, err, dt)
	}

	w, err := lag.NewHangWatch(la, []string{topic}, lag.WithHangInterval(200*time.Millisecond), lag.WithHangAfter(2*time.Second),
		lag.WithHangAbortAfter(time.Second), lag.WithHangBootstrap(bootstrap), lag.WithHangAborter(aborter),
		lag.WithHangLogger(slog.New(slog.NewTextHandler(logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer runHangWatch(ctx, t, w)()
	t.Logf("%s[0] is held at offset 0 (high watermark 1) while its coordinator has the transaction CompleteCommit", topic)
	waitFor("the watch commits the forgotten transaction", func() bool {
		return strings.Contains(logs.String(), "committed the hanging transaction on "+topic+"[0]")
	})
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers": bootstrap, "group.id": txnID, "isolation.level": "read_committed",
		"auto.offset.reset": "earliest", "enable.auto.commit": false, "enable.metrics.push": false,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if err := c.Assign([]kafka.TopicPartition{{Topic: &topic, Partition: 0, Offset: kafka.OffsetBeginning}}); err != nil {
		t.Fatal(err)
	}
	for {
		if ctx.Err() != nil {
			t.Fatalf("a read_committed reader did not get the committed record; logs:\n%s", logs.String())
		}
		m, err := c.ReadMessage(time.Second)
		if err == nil {
			if string(m.Value) != "committed" {
				t.Fatalf("read %q, want the committed record", m.Value)
			}
			t.Logf("a read_committed reader got the record after the watch's commit marker")
			return
		}
	}
}
