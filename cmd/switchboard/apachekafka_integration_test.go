//go:build integration

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
)

// What the integration tests against Apache Kafka share: the broker, a
// prefix that keeps one run's topics and groups apart from every other's,
// a free port, and the topics section of a node's config.

// apacheKafka returns the broker the integration tests run against,
// KAFKA_BOOTSTRAP ('make test-integration' starts one and sets it), or
// fails the test.
func apacheKafka(t testing.TB) string {
	t.Helper()
	b := os.Getenv("KAFKA_BOOTSTRAP")
	if b == "" {
		t.Fatal("KAFKA_BOOTSTRAP is not set: run 'make test-integration' (it starts Apache Kafka), or point it at a broker")
	}
	return b
}

// runPrefix returns name, a dot and eight random hex digits: the prefix of
// one run's topics and consumer groups.
func runPrefix(name string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return name + "." + hex.EncodeToString(b[:])
}

// freeLoopback returns a loopback address no one listened on a moment ago.
func freeLoopback(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// Topics sections for a node's config whose prefix is the format's first
// operand: each is followed in the config by its partitions (and
// auto_create) lines.
const (
	// shortTopics names every topic the node reads or writes after the
	// prefix: p.request, p.response, ...
	shortTopics = `topics:
  requests: %[1]s.request
  responses: %[1]s.response
  results: %[1]s.result
  timeouts: %[1]s.timeout
  progress: %[1]s.progress
  dead_letter: %[1]s.dlq
  pending: %[1]s.pending
  fallback_cache: %[1]s.cache
  context_snapshots: %[1]s.context
`
	// pipelineTopics names them as the source documents do, after the
	// prefix: p.intent.request, p.agent.response, ...
	pipelineTopics = `topics:
  requests: %[1]s.intent.request
  responses: %[1]s.agent.response
  results: %[1]s.intent.result
  timeouts: %[1]s.intent.timeout
  progress: %[1]s.intent.progress
  dead_letter: %[1]s.intent.dlq
  pending: %[1]s.router.pending
  fallback_cache: %[1]s.fallback.cache
  context_snapshots: %[1]s.context.snapshot
`
)

// newNodeFromYAML writes yaml to path, loads it as serve does, makes its
// topics and returns the node it configures, not yet running. The node
// logs to logTo; withAuth turns on the API keys the config names.
func newNodeFromYAML(ctx context.Context, t *testing.T, path, yaml string, logTo io.Writer, withAuth bool) *node {
	t.Helper()
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := loadConfig(path, "")
	if err != nil {
		t.Fatal(err)
	}
	log := newLogger(logTo, cfg.Log.Level, cfg.Log.Format)
	if err := checkTopicsAtStart(ctx, cfg, log); err != nil {
		t.Fatal(err)
	}
	apiCfg, err := apiConfig(cfg, withAuth)
	if err != nil {
		t.Fatal(err)
	}
	n, err := newNode(cfg, apiCfg, log, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// serveWithAgent runs 'switchboard serve --config path' (with extra
// arguments) and a demo agent of that name on the same file until ctx
// ends or the test does, and returns the API's address and serve's log.
// The test's end waits for both; if it failed, their logs are printed.
func serveWithAgent(ctx context.Context, t *testing.T, path, bootstrap, agent string, extra ...string) (addr string, serveLog *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	serveLog = &syncBuffer{}
	var agentLog syncBuffer
	served, agentDone := make(chan int, 1), make(chan int, 1)
	agentStarted := false
	go func() {
		served <- run(ctx, append([]string{"serve", "--config", path}, extra...), io.Discard, serveLog)
	}()
	t.Cleanup(func() {
		cancel()
		<-served
		if agentStarted {
			<-agentDone
		}
		if t.Failed() {
			t.Logf("serve log:\n%s\nagent log:\n%s", serveLog.String(), agentLog.String())
		}
	})
	eventually(t, "serve to listen", func() bool { return strings.Contains(serveLog.String(), "api listening") })
	agentStarted = true
	go func() {
		agentDone <- run(ctx, []string{"agent", "--config", path, "--name", agent, "--brokers", bootstrap}, io.Discard, &agentLog)
	}()
	m := regexp.MustCompile(`"api listening" addr=(\S+)`).FindStringSubmatch(serveLog.String())
	if m == nil {
		t.Fatalf("no api address in the log:\n%s", serveLog.String())
	}
	return m[1], serveLog
}
