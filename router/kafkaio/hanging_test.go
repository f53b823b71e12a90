package kafkaio_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/embedded"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/lag"
)

func TestHangWatchEmbedded(t *testing.T) {
	c, err := embedded.Start(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testHangWatch(t, c.Bootstrap())
}

// lockedBuffer is a log the watch writes and the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// testHangWatch injects a hanging transaction (seen from the readers'
// side): a transactional producer with a long transaction timeout writes
// three records to partition 0 and is closed without committing or
// aborting, as a router killed with SIGKILL would be. LagAdmin.Ends sees
// the last stable offset held at 0 behind a high watermark of 3; the
// HangWatch reports the partition, with the command that aborts it, and
// is not ready; once a new producer with the same transactional.id fences
// the old one (which aborts the transaction), the watch is ready again.
func testHangWatch(t *testing.T, bootstrap string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := newTopic(ctx, t, bootstrap, "hang", 2)
	txID := topic + ".tx"

	txProducer := func() *kafka.Producer {
		t.Helper()
		p, err := kafka.NewProducer(&kafka.ConfigMap{
			"bootstrap.servers": bootstrap, "transactional.id": txID, "enable.metrics.push": false,
			"transaction.timeout.ms": 600_000, // the broker would abort it only after 10 minutes
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.InitTransactions(ctx); err != nil {
			p.Close()
			t.Fatal(err)
		}
		return p
	}
	p := txProducer()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	delivered := make(chan kafka.Event, 3)
	for range 3 {
		if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Value: []byte{'x'}}, delivered); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 { // on the broker, in the open transaction
		select {
		case ev := <-delivered:
			if m, ok := ev.(*kafka.Message); !ok || m.TopicPartition.Error != nil {
				t.Fatalf("producing: %v", ev)
			}
		case <-ctx.Done():
			t.Fatal("the transaction's records were not delivered")
		}
	}
	p.Close() // neither committed nor aborted: the transaction stays open

	la, err := kafkaio.NewLagAdmin(kafkaio.Settings{Bootstrap: bootstrap})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = la.Close() }()
	la.Timeout = 30 * time.Second // a busy host
	ends, err := la.Ends(ctx, []string{topic, topic + ".nope"})
	if err != nil {
		t.Fatal(err)
	}
	if e := ends[topic]; len(e) != 2 || e[0] != (lag.Ends{Stable: 0, High: 3}) || e[1] != (lag.Ends{Stable: 0, High: 0}) {
		t.Fatalf("ends %v, want partition 0 stable 0 high 3 (the open transaction) and partition 1 empty", ends)
	}
	if _, ok := ends[topic+".nope"]; ok {
		t.Fatalf("a topic that does not exist has ends: %v", ends)
	}

	logs := &lockedBuffer{}
	w, err := lag.NewHangWatch(la, []string{topic}, lag.WithHangInterval(100*time.Millisecond), lag.WithHangAfter(time.Second),
		lag.WithHangBootstrap(bootstrap), lag.WithHangLogger(slog.New(slog.NewTextHandler(logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer runHangWatch(ctx, t, w)()
	waitFor := func(what string, cond func() bool) { t.Helper(); waitLogged(t, logs, what, cond) }
	waitFor("the watch reports the hanging transaction", func() bool { return w.Err() != nil })
	if err := w.Err(); !errors.Is(err, lag.ErrHangingTransaction) || !strings.Contains(err.Error(), topic+"[0] held at offset 0 (high watermark 3)") {
		t.Fatalf("Err = %v, want ErrHangingTransaction naming %s[0]", err, topic)
	}
	if want := "TransactionsCommand --bootstrap-server " + bootstrap + " abort --topic " + topic + " --partition 0 --start-offset 0"; !strings.Contains(logs.String(), want) {
		t.Fatalf("the log does not name the abort command %q:\n%s", want, logs.String())
	}

	// The same transactional.id again: InitTransactions fences the old
	// producer and aborts its transaction.
	txProducer().Close()
	waitFor("the watch sees the transaction end", func() bool { return w.Err() == nil })
	if !strings.Contains(logs.String(), "the hanging transaction on "+topic+"[0] has ended") {
		t.Fatalf("no line says the transaction ended:\n%s", logs.String())
	}
}

// runHangWatch runs w until the returned stop is called, which reports
// Run's error.
func runHangWatch(ctx context.Context, t *testing.T, w *lag.HangWatch) (stop func()) {
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

// waitLogged polls cond for up to a minute, failing with the watch's logs.
func waitLogged(t *testing.T, logs *lockedBuffer, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("%s: not within a minute; logs:\n%s", what, logs.String())
		case <-poll.C:
		}
	}
}
