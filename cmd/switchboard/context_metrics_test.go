package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/router/embedded"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
)

// 'context aggregate' runs until stopped, like serve, so an operator
// scrapes it: --metrics-listen serves the aggregator's and its publisher's
// metrics, which before were registered where nobody could read them.
func TestContextAggregateServesMetrics(t *testing.T) {
	c, err := embedded.Start(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := kafkaio.Settings{Bootstrap: c.Bootstrap()}
	if _, err := kafkaio.CreateTopics(ctx, s, []kafkaio.TopicSpec{
		{Name: "agg.events", Partitions: 1, ReplicationFactor: 1},
		{Name: "agg.snapshots", Partitions: 1, ReplicationFactor: 1},
	}); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "switchboard.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `kafka: {bootstrap_servers: %q}
topics: {context_snapshots: agg.snapshots}
agents: {echo: {}}
intents: {echo: {agent: echo, timeout: 2s}}
contexts:
  aggregate:
    events_topic: agg.events
    key_field: user
    features:
      clicks_1m: {op: count, window: 1m}
`, c.Bootstrap()), 0o600); err != nil {
		t.Fatal(err)
	}

	var stderr syncBuffer
	actx, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() {
		done <- run(actx, []string{"context", "aggregate", "--config", cfg, "--metrics-listen", "127.0.0.1:0"}, io.Discard, &stderr)
	}()
	addrRE := regexp.MustCompile(`msg="metrics listening" addr=(\S+)`)
	var addr string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("context aggregate's log:\n%s", stderr.String())
		}
	})
	eventually(t, "the metrics listener's address in the log", func() bool {
		if m := addrRE.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	})

	p, err := kafkaio.NewProducer(s)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(time.Second)
	if err := p.Send(ctx, "agg.events", []byte("u-1"), []byte(`{"user":"u-1"}`), nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	scrape := func() string {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	var body string
	eventually(t, "the event counted in /metrics", func() bool {
		body = scrape()
		return strings.Contains(body, `switchboard_context_aggregate_events_total{result="accepted"} 1`) &&
			strings.Contains(body, "switchboard_context_aggregate_entities 1")
	})
	// The publisher's too (its counter has a series only once a window
	// closes and publishes: the gauge is there from the start).
	for _, want := range []string{"switchboard_context_publish_suppression_ratio", "go_goroutines", "process_resident_memory_bytes"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if resp, err := http.Get("http://" + addr + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %v %v", resp, err)
	} else {
		_ = resp.Body.Close()
	}

	stop()
	if code := <-done; code != 0 {
		t.Fatalf("context aggregate: exit %d\n%s", code, stderr.String())
	}
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Fatal("the metrics listener outlived the command")
	}
}

func TestContextAggregateMetricsListenIsValidated(t *testing.T) {
	if _, err := listenMetrics("9102", slog.Default()); err == nil || !strings.Contains(err.Error(), "not host:port") {
		t.Fatalf("listenMetrics(9102): %v", err)
	}
	m, err := listenMetrics("127.0.0.1:0", slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	if _, err := listenMetrics(m.ln.Addr().String(), slog.Default()); err == nil || !strings.Contains(err.Error(), "--metrics-listen") {
		t.Fatalf("a port in use: %v", err)
	}
}

// The metrics listener holds at most maxMetricsConnections: one more is
// closed at once, unanswered, and counted; a slot comes back when a
// connection closes.
func TestMetricsListenerIsBounded(t *testing.T) {
	m, err := listenMetrics("127.0.0.1:0", slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	m.serve()
	defer m.close()
	addr := m.ln.Addr().String()
	held := make([]net.Conn, 0, maxMetricsConnections)
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	for range maxMetricsConnections {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	// Accepted connections are counted in order: the one past the bound
	// is closed by the server without a byte.
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = extra.Close() }()
	if err := extra.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := extra.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("the connection past the bound: read %d bytes, %v; want it closed at once", n, err)
	}
	_ = held[0].Close()
	held = held[1:]
	// The slot comes back once the server sees the close: retry the scrape
	// until one gets through (each failed try is refused and counted too).
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if !regexp.MustCompile(`(?m)^switchboard_metrics_connections_refused_total [1-9]`).Match(b) {
				t.Fatalf("refusals not counted:\n%s", b)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no scrape got through after a connection closed: %v", err)
		}
	}
}

// failingCollector fails every collection.
type failingCollector struct{}

func (failingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- prometheus.NewDesc("switchboard_test_failing", "fails", nil, nil)
}

func (failingCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.NewInvalidMetric(prometheus.NewDesc("switchboard_test_failing", "fails", nil, nil), errors.New("broken"))
}

// A collector that fails leaves its metrics out of the scrape, not the
// others: the aggregator's metrics stay readable.
func TestMetricsListenerServesPastAFailingCollector(t *testing.T) {
	m, err := listenMetrics("127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	m.reg.MustRegister(failingCollector{})
	m.serve()
	defer m.close()
	resp, err := http.Get("http://" + m.ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "go_goroutines") {
		t.Fatalf("status %d, body:\n%.300s", resp.StatusCode, b)
	}
}
