//go:build integration

package kafkaio_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
)

// TestGroupReaderReadsOnAfterBrokerRestarts restarts the broker that
// deploy/kafka/kafka.sh runs GROUPREADER_RESTARTS times while a GroupReader
// reads a topic under a steady load (its records marked done 50 ms after
// they are read, as the agent runner's answers are), and checks after each
// restart that the reader reads a record produced after the broker came
// back, within a deadline. The Go agent runner once read nothing more after
// a broker restart; this is its reproduction: in 1 restart of 12 the broker,
// going down, answered a metadata request with no brokers, librdkafka forgot
// every broker it knew (librdkafka#5301) and re-bootstrapped only after
// metadata.recovery.rebootstrap.trigger.ms (5 minutes), while the reader
// waited on its commit, queued for a coordinator it could not find.
// It needs the broker to itself (it restarts it), so it runs only when
// GROUPREADER_RESTARTS is set, with KAFKA_CONTROLLER_PORT and
// SWITCHBOARD_KAFKA_DIR as kafka.sh was started with. GROUPREADER_DEBUG=file
// writes librdkafka's cgrp, consumer, broker and metadata debug lines there.
func TestGroupReaderReadsOnAfterBrokerRestarts(t *testing.T) {
	restarts, _ := strconv.Atoi(os.Getenv("GROUPREADER_RESTARTS"))
	if restarts <= 0 {
		t.Skip("GROUPREADER_RESTARTS is not set: this test restarts the broker kafka.sh runs, N times")
	}
	bootstrap := os.Getenv("KAFKA_BOOTSTRAP")
	host, kport, err := net.SplitHostPort(bootstrap)
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("KAFKA_BOOTSTRAP=%q: want the one broker kafka.sh runs on 127.0.0.1", bootstrap)
	}
	kafkaSh := func(ctx context.Context, verb string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, "../../deploy/kafka/kafka.sh", verb)
		cmd.Env = append(os.Environ(), "KAFKA_PORT="+kport)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kafka.sh %s: %v\n%s", verb, err, out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(restarts)*3*time.Minute)
	defer cancel()
	t.Cleanup(func() { // leave the broker up for whatever runs next
		cmd := exec.Command("../../deploy/kafka/kafka.sh", "up")
		cmd.Env = append(os.Environ(), "KAFKA_PORT="+kport)
		_ = cmd.Run()
	})

	logger := slog.New(slog.DiscardHandler)
	props := map[string]string{"session.timeout.ms": "6000", "heartbeat.interval.ms": "1000"} // the chaos test's
	if path := os.Getenv("GROUPREADER_DEBUG"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		logger = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
		props["debug"] = "cgrp,consumer,broker,metadata"
	}
	s := kafkaio.Settings{Bootstrap: bootstrap, Properties: props, Logger: logger}
	topic := fmt.Sprintf("grouprestart.%d", time.Now().UnixNano())
	if _, err := kafkaio.CreateTopics(ctx, kafkaio.Settings{Bootstrap: bootstrap}, []kafkaio.TopicSpec{{Name: topic, Partitions: 6, ReplicationFactor: 1}}); err != nil {
		t.Fatal(err)
	}

	// The load: a record every 2 ms, its value the time it was produced. The
	// producer meets librdkafka#5301 too (it stopped producing for good at
	// restart 33 of 40 once): it re-bootstraps after 10 s, and the check
	// tells its stall from the reader's by the records acknowledged.
	p, err := kafka.NewProducer(&kafka.ConfigMap{
		"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.metrics.push": false, "log_level": 2,
		"metadata.recovery.rebootstrap.trigger.ms": 10000,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var acked atomic.Int64 // the production time of the newest record acknowledged
	go func() {
		for ev := range p.Events() { // delivery reports: failures during the outage are expected
			if m, ok := ev.(*kafka.Message); ok && m.TopicPartition.Error == nil {
				if ns, err := strconv.ParseInt(string(m.Value), 10, 64); err == nil && ns > acked.Load() {
					acked.Store(ns)
				}
			}
		}
	}()
	loadDone := make(chan struct{})
	loadCtx, stopLoad := context.WithCancel(ctx)
	go func() {
		defer close(loadDone)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-loadCtx.Done():
				return
			case <-tick.C:
			}
			v := strconv.FormatInt(time.Now().UnixNano(), 10)
			_ = p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: int32(i % 6)}, Value: []byte(v)}, nil)
		}
	}()
	defer func() { stopLoad(); <-loadDone }()

	var commitErrs atomic.Int64
	r, err := kafkaio.NewGroupReader(s, topic+".group", []string{topic}, kafkaio.GroupReaderOptions{
		OnCommitError: func(err error) { commitErrs.Add(1); t.Logf("%s commit: %v", time.Now().Format("15:04:05.000"), err) },
	})
	if err != nil {
		t.Fatal(err)
	}
	var newest atomic.Int64 // the production time of the newest record read
	readCtx, stopRead := context.WithCancel(ctx)
	readErr := make(chan error, 1)
	go func() {
		readErr <- r.Read(readCtx, func(rec *port.Record, done func()) error {
			if ns, err := strconv.ParseInt(string(rec.Value), 10, 64); err == nil && ns > newest.Load() {
				newest.Store(ns)
			}
			time.AfterFunc(50*time.Millisecond, done)
			return nil
		})
	}()
	defer func() {
		stopRead()
		if err := <-readErr; err != nil {
			t.Errorf("Read: %v", err)
		}
		closed := make(chan error, 1)
		go func() { closed <- r.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Logf("Close: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("Close did not return")
		}
	}()

	readsSince := func(since time.Time, within time.Duration) bool {
		deadline := time.Now().Add(within)
		for time.Now().Before(deadline) {
			if newest.Load() > since.UnixNano() {
				return true
			}
			select {
			case <-time.After(100 * time.Millisecond): // polling a condition, with a deadline
			case <-ctx.Done():
				return false
			}
		}
		return false
	}
	if !readsSince(time.Now(), time.Minute) {
		t.Fatal("the reader read nothing in its first minute")
	}
	const within = 45 * time.Second // a session timeout and a rejoin, with room
	for i := 1; i <= restarts; i++ {
		kafkaSh(ctx, "down")
		kafkaSh(ctx, "up")
		up := time.Now()
		if !readsSince(up, within) {
			if acked.Load() <= up.UnixNano() {
				t.Fatalf("restart %d of %d: the load's producer had no record acknowledged since the broker came back (at %s), within %s: no verdict on the reader",
					i, restarts, up.Format("15:04:05.000"), within)
			}
			t.Fatalf("restart %d of %d: the reader read no record produced after the broker came back (at %s) within %s, records produced since were acknowledged; %d commit errors so far",
				i, restarts, up.Format("15:04:05.000"), within, commitErrs.Load())
		}
		t.Logf("restart %d of %d: reading again %s after the broker answered", i, restarts, time.Since(up).Round(time.Millisecond))
	}
}
