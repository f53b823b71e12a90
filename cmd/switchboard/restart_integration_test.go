//go:build integration && linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// TestRoutersAnswerAfterBrokerRestarts restarts the broker that
// deploy/kafka/kafka.sh runs, ROUTER_RESTARTS times (default 2), while two
// nodes (router and API, one exactly_once, one at_least_once, each with a
// demo agent) answer a light load through the HTTP API (POST
// /v1/intents?wait, two intents a second each), and checks after each
// restart that an intent posted after the broker came back is answered by
// the agent within restartAnswerWithin: every client on the way (the API's
// producer and result reader, the router's consumer and producers, the
// agent's) found the broker again. librdkafka 2.10 and later forgets every
// broker it knew when a broker going down answers a metadata request with
// no brokers (librdkafka#5301), and connects to the bootstrap servers again
// only after metadata.recovery.rebootstrap.trigger.ms, 5 minutes by
// default: a client that met it stopped for 5 minutes. After an intent is
// not answered in time the test says which topics saw records since the
// broker came back and waits up to restartRecoverWithin for the node to
// answer again, to tell a 5-minute stall from a dead node, then goes on.
//
// It restarts the broker, so it runs only with SWITCHBOARD_CHAOS=1 (make
// test-integration sets it; -p 1 keeps other packages' tests off the broker
// meanwhile) or ROUTER_RESTARTS set, with KAFKA_CONTROLLER_PORT and
// SWITCHBOARD_KAFKA_DIR as kafka.sh was started with. ROUTER_RESTARTS_LOGS=dir
// keeps the nodes' and agents' logs there; ROUTER_RESTARTS_DEBUG=1 adds
// librdkafka's broker, metadata and cgrp debug lines to them.
func TestRoutersAnswerAfterBrokerRestarts(t *testing.T) {
	restarts := 2
	if v := os.Getenv("ROUTER_RESTARTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("ROUTER_RESTARTS=%q: want a number of restarts, at least 1", v)
		}
		restarts = n
	} else if os.Getenv("SWITCHBOARD_CHAOS") != "1" {
		t.Skip("neither SWITCHBOARD_CHAOS=1 nor ROUTER_RESTARTS is set: this test restarts the broker kafka.sh runs")
	}
	bootstrap := apacheKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute+time.Duration(restarts)*(time.Minute+restartRecoverWithin))
	defer cancel()
	broker, err := manageableBroker(ctx, bootstrap)
	if err != nil {
		t.Fatalf("the test cannot restart the broker: %v", err)
	}
	t.Cleanup(func() { // leave the broker up for whatever runs next
		if err := broker.ensureUp(); err != nil {
			t.Errorf("starting the broker again after the test: %v", err)
		}
	})
	logDir := os.Getenv("ROUTER_RESTARTS_LOGS")
	if logDir == "" {
		logDir = t.TempDir()
	} else if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}

	var stacks []*restartStack
	for _, delivery := range []string{"exactly_once", "at_least_once"} {
		stacks = append(stacks, startRestartStack(ctx, t, bootstrap, delivery, logDir))
	}
	var wg sync.WaitGroup
	for _, s := range stacks {
		wg.Go(func() {
			if _, ok := s.answeredSince(ctx, time.Now(), time.Minute); !ok {
				t.Errorf("%s: no intent answered in the first minute: the node or the agent is not working (logs in %s)", s.delivery, logDir)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	stalls := map[string]int{}
	for i := 1; i <= restarts; i++ {
		w, err := broker.restart(ctx, 0)
		if err != nil {
			t.Fatalf("restart %d of %d: %v", i, restarts, err)
		}
		up := time.UnixMilli(w.to)
		lines := make([]string, len(stacks))
		for j, s := range stacks {
			wg.Go(func() {
				took, ok := s.answeredSince(ctx, up, restartAnswerWithin)
				if ok {
					lines[j] = fmt.Sprintf("%s answered after %s", s.delivery, took.Round(10*time.Millisecond))
					return
				}
				seen := s.seenSince(up)
				took, ok = s.answeredSince(ctx, up, restartRecoverWithin)
				lines[j] = fmt.Sprintf("%s STALLED: nothing answered within %s (records since the broker came back, by topic: %s); answering again after %s",
					s.delivery, restartAnswerWithin, seen, map[bool]string{true: took.Round(time.Second).String(), false: "more than " + restartRecoverWithin.String()}[ok])
			})
		}
		wg.Wait()
		for j, s := range stacks {
			if strings.Contains(lines[j], "STALLED") {
				stalls[s.delivery]++
				t.Errorf("restart %d of %d (broker answering at %s): %s", i, restarts, up.Format("15:04:05.000"), lines[j])
			}
		}
		t.Logf("restart %d of %d: %s", i, restarts, strings.Join(lines, "; "))
	}
	t.Logf("restarts: %d; stalls: exactly_once %d, at_least_once %d (logs in %s)", restarts, stalls["exactly_once"], stalls["at_least_once"], logDir)
}

const (
	// restartAnswerWithin is how long after the broker answers again an
	// intent posted since may take to be answered: clients reconnect
	// (librdkafka's backoff tops at 10 s), the router's group rejoins
	// (a 6 s session), the intent's own way; well under librdkafka's
	// 5-minute re-bootstrap.
	restartAnswerWithin  = 60 * time.Second
	restartRecoverWithin = 6 * time.Minute
	restartIntentTimeout = 20 * time.Second
)

// restartStack is one node (router and API) and its demo agent, in this
// process, and the load posted to its API.
type restartStack struct {
	delivery string
	base     string
	topics   map[string]string // requests, dispatches, responses, results

	answered atomic.Int64             // the post time (unix ns) of the newest intent answered
	seen     map[string]*atomic.Int64 // topic -> when its newest record was read (unix ns)
}

func startRestartStack(ctx context.Context, t *testing.T, bootstrap, delivery, logDir string) *restartStack {
	t.Helper()
	p := "restart." + randomHex(4)
	httpAddr := freeLoopback(t)
	level, debug := "info", ""
	if os.Getenv("ROUTER_RESTARTS_DEBUG") != "" {
		level, debug = "debug", `    debug: "broker,metadata,cgrp"`
	}
	cfgFile := filepath.Join(logDir, delivery+".yaml")
	yaml := fmt.Sprintf(`kafka:
  bootstrap_servers: %[2]q
  group_id: %[1]s.router
  properties:
    session.timeout.ms: "6000"
    heartbeat.interval.ms: "1000"
%[6]s
`+shortTopics+`  partitions: 2
  auto_create: true
agents:
  worker: {topic: %[1]s.agent.worker, group_id: %[1]s.workers}
intents:
  work: {agent: worker, timeout: %[7]s}
router: {instance_id: %[1]s-1, delivery: %[3]s}
http: {listen: %[4]q, auth: {mode: off}}
log: {level: %[5]s}
`, p, bootstrap, delivery, httpAddr, level, debug, restartIntentTimeout)
	if err := os.WriteFile(cfgFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := loadConfig(cfgFile, "")
	if err != nil {
		t.Fatal(err)
	}
	logFile := func(name string) *os.File {
		f, err := os.Create(filepath.Join(logDir, delivery+"-"+name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		return f
	}
	log := newLogger(logFile("node"), cfg.Log.Level, cfg.Log.Format)
	if err := checkTopicsAtStart(ctx, cfg, log); err != nil {
		t.Fatal(err)
	}
	apiCfg, err := apiConfig(cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	n, err := newNode(cfg, apiCfg, log, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := &restartStack{
		delivery: delivery, base: "http://" + httpAddr,
		topics: map[string]string{"requests": cfg.Topics.Requests, "dispatches": p + ".agent.worker", "responses": cfg.Topics.Responses, "results": cfg.Topics.Results},
		seen:   map[string]*atomic.Int64{},
	}
	for _, topic := range s.topics {
		s.seen[topic] = new(atomic.Int64)
	}

	// Stopped in reverse: the load, the watch, the agent, the node.
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	ran := make(chan error, 1)
	go func() { ran <- n.run(runCtx) }()
	agentLog := logFile("agent")
	wg.Go(func() {
		if err := runAgent(runCtx, []string{"--config", cfgFile, "--name", "worker"}, io.Discard, agentLog); err != nil && runCtx.Err() == nil {
			t.Errorf("%s agent: %v", delivery, err)
		}
	})
	wg.Go(func() { s.watch(runCtx, t, bootstrap) })
	wg.Go(func() { s.load(runCtx) })
	t.Cleanup(func() {
		stop()
		wg.Wait()
		select {
		case err := <-ran:
			if err != nil {
				t.Errorf("%s node: %v", delivery, err)
			}
		case <-time.After(time.Minute):
			t.Errorf("%s node did not stop within a minute", delivery)
		}
	})
	return s
}

// load posts an intent every 500 ms, each waiting for its result, and
// keeps the post time of the newest one the agent answered.
func (s *restartStack) load(ctx context.Context) {
	client := &http.Client{Timeout: restartIntentTimeout + 10*time.Second}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		wg.Go(func() {
			at := time.Now().UnixNano()
			body := fmt.Sprintf(`{"intent_id":%q,"intent_type":"work","payload":{}}`, intents.NewID())
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/v1/intents?wait="+restartIntentTimeout.String(), strings.NewReader(body))
			if err != nil {
				return
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				return // the broker is away, or the test is ending
			}
			defer resp.Body.Close()
			var res schemas.IntentResult
			if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&res) != nil || res.Outcome != schemas.OutcomeAnswered {
				return
			}
			for {
				last := s.answered.Load()
				if at <= last || s.answered.CompareAndSwap(last, at) {
					return
				}
			}
		})
	}
}

// watch notes when each of the stack's topics last had a record, to say
// where an intent stopped. Its own client re-bootstraps after 10 s
// whatever kafkaio's default, so that it sees what the node does not.
func (s *restartStack) watch(ctx context.Context, t *testing.T, bootstrap string) {
	topics := make([]string, 0, len(s.topics))
	for _, topic := range s.topics {
		topics = append(topics, topic)
	}
	settings := kafkaio.Settings{Bootstrap: bootstrap, Properties: map[string]string{"metadata.recovery.rebootstrap.trigger.ms": "10000"}, Logger: newLogger(io.Discard, "error", "")}
	err := kafkaio.Read(ctx, settings, kafkaio.Reading{Topics: topics, From: kafkaio.FromBeginning()}, func(rec *port.Record) error {
		s.seen[rec.Topic].Store(time.Now().UnixNano())
		return nil
	})
	if err != nil && ctx.Err() == nil {
		t.Errorf("%s: watching the topics: %v", s.delivery, err)
	}
}

// answeredSince waits up to within for an intent posted at or after since
// to be answered, and returns how long after since it was.
func (s *restartStack) answeredSince(ctx context.Context, since time.Time, within time.Duration) (time.Duration, bool) {
	deadline := since.Add(within)
	for time.Now().Before(deadline) {
		if s.answered.Load() >= since.UnixNano() {
			return time.Since(since), true
		}
		select {
		case <-time.After(100 * time.Millisecond): // polling a condition, with a deadline
		case <-ctx.Done():
			return 0, false
		}
	}
	return 0, false
}

// seenSince says which of the stack's topics had a record since t.
func (s *restartStack) seenSince(t time.Time) string {
	var out []string
	for role, topic := range s.topics {
		out = append(out, fmt.Sprintf("%s %v", role, s.seen[topic].Load() >= t.UnixNano()))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
