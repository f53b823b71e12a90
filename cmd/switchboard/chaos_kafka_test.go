//go:build integration && linux

package main

// Kafka for the chaos test: reading a topic to its end, counting records as
// they arrive, and restarting the local broker that deploy/kafka/kafka.sh runs.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
)

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// readToEnd reads every partition of topic from its beginning up to the end
// it has when the read starts, committed records only (read_committed: the
// end of a partition is its last stable offset, and records of aborted
// transactions are skipped), and calls fn for each record. Nothing may be
// writing to the topic: what is written during the read may or may not be
// seen.
func readToEnd(ctx context.Context, bootstrap, topic string, fn func(*kafka.Message)) error {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers":    bootstrap,
		"group.id":             "switchboard-chaos-read-" + randomHex(6),
		"enable.auto.commit":   false,
		"isolation.level":      "read_committed",
		"enable.partition.eof": true,
		"auto.offset.reset":    "earliest",
		"enable.metrics.push":  false,
	})
	if err != nil {
		return fmt.Errorf("reading %s: %w", topic, err)
	}
	defer func() { _ = c.Close() }()
	md, err := c.GetMetadata(&topic, false, 10_000)
	if err != nil {
		return fmt.Errorf("reading %s: metadata: %w", topic, err)
	}
	tm, ok := md.Topics[topic]
	if !ok || tm.Error.Code() != kafka.ErrNoError || len(tm.Partitions) == 0 {
		return fmt.Errorf("reading %s: the topic is not available (%v)", topic, tm.Error)
	}
	end := map[int32]int64{}   // partition -> the offset to reach
	where := map[int32]int64{} // partition -> how far the read got
	var assign []kafka.TopicPartition
	for _, p := range tm.Partitions {
		low, high, err := c.QueryWatermarkOffsets(topic, p.ID, 10_000)
		if err != nil {
			return fmt.Errorf("reading %s[%d]: watermarks: %w", topic, p.ID, err)
		}
		if high > low {
			end[p.ID] = high
			where[p.ID] = low
			assign = append(assign, kafka.TopicPartition{Topic: &topic, Partition: p.ID, Offset: kafka.OffsetBeginning})
		}
	}
	if len(assign) == 0 {
		return nil
	}
	if err := c.Assign(assign); err != nil {
		return fmt.Errorf("reading %s: %w", topic, err)
	}
	for len(end) > 0 {
		if ctx.Err() != nil {
			var left []string
			for p, e := range end {
				left = append(left, fmt.Sprintf("[%d] at %d of %d", p, where[p], e))
			}
			sort.Strings(left)
			return fmt.Errorf("reading %s: not at the end in time (%s): an open transaction holds the last stable offset back, or the broker is away", topic, strings.Join(left, ", "))
		}
		switch e := c.Poll(100).(type) {
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				continue
			}
			p, off := e.TopicPartition.Partition, int64(e.TopicPartition.Offset)
			if want, ok := end[p]; ok {
				fn(e)
				where[p] = off + 1
				if off+1 >= want {
					delete(end, p)
				}
			}
		case kafka.PartitionEOF:
			// The read reached the partition's end: past control records
			// (transaction markers) that no message stands for.
			p := e.Partition
			if want, ok := end[p]; ok {
				where[p] = int64(e.Offset)
				if int64(e.Offset) >= want {
					delete(end, p)
				}
			}
		case kafka.Error:
			if e.IsFatal() {
				return fmt.Errorf("reading %s: %w", topic, e)
			}
		}
	}
	return nil
}

// liveCounts counts the records of a topic by key as they arrive, read
// committed, from the beginning: how the test watches progress and knows
// when to stop waiting. The verdict reads the topics again with readToEnd.
type liveCounts struct {
	mu    sync.Mutex
	keys  map[string]int
	first map[string]int64 // key -> when its first record was read (unix ms): the drill's latencies
	n     int
	err   error
	done  chan struct{}
}

func watchTopic(ctx context.Context, bootstrap, topic string) *liveCounts {
	lc := &liveCounts{keys: map[string]int{}, first: map[string]int64{}, done: make(chan struct{})}
	go func() {
		defer close(lc.done)
		err := kafkaio.Read(ctx, kafkaio.Settings{Bootstrap: bootstrap}, kafkaio.Reading{Topics: []string{topic}, From: kafkaio.FromBeginning()}, func(rec *port.Record) error {
			at := time.Now().UnixMilli()
			lc.mu.Lock()
			if lc.keys[string(rec.Key)] == 0 {
				lc.first[string(rec.Key)] = at
			}
			lc.keys[string(rec.Key)]++
			lc.n++
			lc.mu.Unlock()
			return nil
		})
		if err != nil && ctx.Err() == nil {
			lc.mu.Lock()
			lc.err = err
			lc.mu.Unlock()
		}
	}()
	return lc
}

func (lc *liveCounts) total() int {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.n
}

// firstSeen returns when key's first record was read (unix ms), 0 if never.
func (lc *liveCounts) firstSeen(key string) int64 {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.first[key]
}

func (lc *liveCounts) has(key string) bool {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.keys[key] > 0
}

// lacking returns how many of ids have no record yet.
func (lc *liveCounts) lacking(ids func(yield func(string) bool)) int {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	n := 0
	for id := range ids {
		if lc.keys[id] == 0 {
			n++
		}
	}
	return n
}

// localBroker is the broker deploy/kafka/kafka.sh runs, when it is the one at
// bootstrap: the chaos test restarts it.
type localBroker struct {
	script string
	env    []string
}

// manageableBroker returns the kafka.sh broker at bootstrap, or why the test
// cannot restart it.
func manageableBroker(ctx context.Context, bootstrap string) (*localBroker, error) {
	host, port, err := net.SplitHostPort(bootstrap)
	if err != nil || strings.Contains(bootstrap, ",") {
		return nil, fmt.Errorf("KAFKA_BOOTSTRAP=%s is not one host:port", bootstrap)
	}
	if host != "127.0.0.1" && host != "localhost" {
		return nil, fmt.Errorf("KAFKA_BOOTSTRAP=%s is not a local broker: only the one deploy/kafka/kafka.sh runs on 127.0.0.1 can be restarted", bootstrap)
	}
	b := &localBroker{script: "../../deploy/kafka/kafka.sh", env: append(os.Environ(), "KAFKA_PORT="+port)}
	if out, err := b.run(ctx, "status"); err != nil {
		return nil, fmt.Errorf("deploy/kafka/kafka.sh status (KAFKA_PORT=%s; KAFKA_CONTROLLER_PORT and SWITCHBOARD_KAFKA_DIR from the environment) says the broker at %s is not one it runs: %v\n%s",
			port, bootstrap, err, out)
	}
	return b, nil
}

func (b *localBroker) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, b.script, args...)
	cmd.Env = b.env
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// restart stops the broker, leaves it down for downFor more, starts it
// again, and returns when it went down and when it answered again.
func (b *localBroker) restart(ctx context.Context, downFor time.Duration) (window, error) {
	var w window
	w.from = time.Now().UnixMilli()
	if out, err := b.run(ctx, "down"); err != nil {
		return w, fmt.Errorf("kafka.sh down: %w\n%s", err, out)
	}
	select {
	case <-time.After(downFor): // the outage's length: the workload, not a wait for something
	case <-ctx.Done():
		return w, ctx.Err()
	}
	out, err := b.run(ctx, "up")
	w.to = time.Now().UnixMilli()
	if err != nil {
		return w, fmt.Errorf("kafka.sh up: %w\n%s", err, out)
	}
	return w, nil
}

// ensureUp starts the broker if it is not running: the cleanup of a test that
// stopped in the middle of a restart.
func (b *localBroker) ensureUp() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := b.run(ctx, "status"); err == nil {
		return nil
	}
	out, err := b.run(ctx, "up")
	if err != nil {
		return errors.Join(err, errors.New(out))
	}
	return nil
}
