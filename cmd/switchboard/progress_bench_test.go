//go:build integration

package main

// The streaming benchmark of issue 18 on Apache Kafka: one node (router,
// API, feed) and the writer agent in process; each intent is followed by
// one WebSocket client (subscribed by id with progress: true) and one
// Server-Sent Events client; chunks/s through the router to both, and the
// latency of a chunk (agent's produced_at to the client) against the
// result's (the answer record's timestamp to the client).
//
//	KAFKA_BOOTSTRAP=127.0.0.1:9092 go test -tags integration -run '^$' \
//	  -bench ProgressStreaming -benchtime 1x ./cmd/switchboard
//
// PROGRESS_BENCH_INTENTS (default 1000: 1,000 WebSocket and 1,000 SSE
// clients), PROGRESS_BENCH_WORDS (chunks per intent, default 20) and
// PROGRESS_BENCH_DELAY_MS (the writer's pause before each chunk, default
// 50) change the shape.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/intents/client"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/schemas"
)

const progressBenchConfig = `
kafka: {bootstrap_servers: %[2]s, group_id: %[1]s.router}
` + pipelineTopics + `  partitions: 6
agents:
  writer: {topic: %[1]s.agent.writer.request}
intents:
  write: {agent: writer, timeout: 5m}
http:
  listen: 127.0.0.1:0
  websocket: {max_subscriptions: 10000, max_connections_per_tenant: 100000}
log: {level: warn}
`

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// arrival is one message a client read: when, and when its record was made.
type arrival struct {
	at, made int64 // unix ms
	result   bool
}

func BenchmarkProgressStreaming(b *testing.B) {
	bootstrap := os.Getenv("KAFKA_BOOTSTRAP")
	if bootstrap == "" {
		b.Skip("KAFKA_BOOTSTRAP is not set")
	}
	n, words, delay := envInt("PROGRESS_BENCH_INTENTS", 1000), envInt("PROGRESS_BENCH_WORDS", 20), envInt("PROGRESS_BENCH_DELAY_MS", 50)
	b.StopTimer() // each run times its own streaming part
	for range b.N {
		benchProgressOnce(b, bootstrap, n, words, delay)
	}
}

func benchProgressOnce(b *testing.B, bootstrap string, n, words, delayMs int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	prefix := "pbench." + randomHex(4)
	cfg, err := config.Parse("bench.yaml", fmt.Appendf(nil, progressBenchConfig, prefix, bootstrap), nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := kafkaio.EnsureTopics(ctx, settingsOf(cfg, "pbench"), cfg.TopicPlans(), true); err != nil {
		b.Fatal(err)
	}
	apiCfg, err := apiConfig(cfg, false)
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	node, err := newNode(cfg, apiCfg, log, nil, 0)
	if err != nil {
		b.Fatal(err)
	}
	nctx, stop := context.WithCancel(ctx)
	var parts sync.WaitGroup
	parts.Go(func() {
		if err := node.run(nctx); err != nil {
			b.Error(err)
		}
	})
	agent, err := client.NewAgent(client.AgentConfig{
		Name: "writer", Topic: cfg.Agents["writer"].Topic, ResponsesTopic: cfg.Topics.Responses, Concurrency: n,
		Kafka: settingsOf(cfg, "pbench-agent"), Codec: node.codec, Logger: log,
	}, client.WriterHandler("writer", nil))
	if err != nil {
		b.Fatal(err)
	}
	parts.Go(func() {
		if err := agent.Run(nctx); err != nil {
			b.Error(err)
		}
	})
	defer func() { stop(); parts.Wait() }()
	select {
	case <-node.api.Ready():
	case <-ctx.Done():
		b.Fatal("the API did not start")
	}
	addr := node.api.Addr()
	if err := waitUntil(ctx, time.Minute, 50*time.Millisecond, func() bool { return node.ready() == nil }); err != nil {
		b.Fatal("the router did not become ready")
	}

	ids := make([]string, n)
	for i := range ids {
		ids[i] = intents.NewID()
	}
	var mu sync.Mutex
	var ws, sse []arrival
	var clients sync.WaitGroup
	for _, id := range ids {
		conn, _, err := websocket.DefaultDialer.DialContext(ctx, "ws://"+addr+"/v1/stream", nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := conn.WriteJSON(map[string]any{"subscribe": map[string]any{"intent_ids": []string{id}, "progress": true}}); err != nil {
			b.Fatal(err)
		}
		var ack struct{ Type string }
		if err := conn.ReadJSON(&ack); err != nil || ack.Type != "subscribed" {
			b.Fatalf("subscribe: %v %s", err, ack.Type)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/intents/"+id+"/events", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("events: %v", err)
		}
		clients.Add(2)
		go func() {
			defer clients.Done()
			defer func() { _ = conn.Close() }()
			var mine []arrival
			for {
				var m struct {
					Type     string
					Progress *schemas.IntentProgress
					Result   *schemas.IntentResult
				}
				if err := conn.ReadJSON(&m); err != nil {
					b.Errorf("websocket: %v", err)
					return
				}
				at := time.Now().UnixMilli()
				switch m.Type {
				case "progress":
					mine = append(mine, arrival{at: at, made: *m.Progress.ProducedAt})
				case "result":
					mine = append(mine, arrival{at: at, made: *m.Result.Timeline.AnsweredAt, result: true})
					mu.Lock()
					ws = append(ws, mine...)
					mu.Unlock()
					return
				}
			}
		}()
		go func() {
			defer clients.Done()
			defer resp.Body.Close()
			var mine []arrival
			sc := bufio.NewScanner(resp.Body)
			event := ""
			for sc.Scan() {
				line := sc.Text()
				if e, ok := strings.CutPrefix(line, "event: "); ok {
					event = e
				}
				data, ok := strings.CutPrefix(line, "data: ")
				if !ok {
					continue
				}
				at := time.Now().UnixMilli()
				switch event {
				case "progress":
					var p schemas.IntentProgress
					if json.Unmarshal([]byte(data), &p) == nil {
						mine = append(mine, arrival{at: at, made: *p.ProducedAt})
					}
				case "result":
					var r schemas.IntentResult
					if json.Unmarshal([]byte(data), &r) == nil {
						mine = append(mine, arrival{at: at, made: *r.Timeline.AnsweredAt, result: true})
					}
					mu.Lock()
					sse = append(sse, mine...)
					mu.Unlock()
					return
				}
			}
			b.Errorf("events of %s ended without the result: %v", id, sc.Err())
		}()
	}

	pub, err := client.NewPublisher(settingsOf(cfg, "pbench-pub"), node.codec, cfg.Topics.Requests)
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	payload := schemas.JSON(fmt.Sprintf(`{"words":%d,"delay_ms":%d}`, words, delayMs))
	b.StartTimer()
	start := time.Now()
	var pubs sync.WaitGroup
	for _, id := range ids {
		pubs.Go(func() {
			if err := pub.Publish(ctx, &schemas.IntentRequest{IntentID: id, IntentType: "write", Payload: payload}); err != nil {
				b.Error(err)
			}
		})
	}
	pubs.Wait()
	clients.Wait()
	took := time.Since(start)
	b.StopTimer()

	chunks := n * words
	wsChunk, wsResult := arrivalLatencies(ws)
	sseChunk, sseResult := arrivalLatencies(sse)
	if len(wsChunk) != chunks || len(sseChunk) != chunks || len(wsResult) != n || len(sseResult) != n {
		b.Fatalf("chunks seen: websocket %d, sse %d, want %d; results %d and %d, want %d", len(wsChunk), len(sseChunk), chunks, len(wsResult), len(sseResult), n)
	}
	b.ReportMetric(float64(chunks)/took.Seconds(), "chunks/s")
	b.ReportMetric(scrapeMetric(b, addr, "switchboard_api_results_held_total"), "results-held")
	b.ReportMetric(float64(2*(chunks+n))/took.Seconds(), "deliveries/s")
	for _, m := range []struct {
		unit string
		v    []int64
	}{
		{"ws-chunk-p50-ms", wsChunk}, {"sse-chunk-p50-ms", sseChunk}, {"ws-result-p50-ms", wsResult}, {"sse-result-p50-ms", sseResult},
	} {
		b.ReportMetric(float64(pct(m.v, 50)), m.unit)
		b.ReportMetric(float64(pct(m.v, 99)), strings.Replace(m.unit, "p50", "p99", 1))
	}
}

// scrapeMetric reads one unlabelled metric from the node's /metrics.
func scrapeMetric(b *testing.B, addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// arrivalLatencies splits arrivals into chunk and result latencies (ms), sorted.
func arrivalLatencies(as []arrival) (chunk, result []int64) {
	for _, a := range as {
		if a.result {
			result = append(result, a.at-a.made)
		} else {
			chunk = append(chunk, a.at-a.made)
		}
	}
	slices.Sort(chunk)
	slices.Sort(result)
	return chunk, result
}

func pct(sorted []int64, p int) int64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}
