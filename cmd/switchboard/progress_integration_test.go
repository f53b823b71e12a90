//go:build integration && linux

package main

// Issue 18's done-when test on Apache Kafka: a writer agent streams 200
// chunks for each of 100 concurrent intents; a WebSocket client and an
// SSE client per intent, connected to instance B, receive every chunk of
// their intents in order and then the result, with none missing and none
// twice, although B (which owns some of the intents' partitions) is killed
// with SIGKILL mid-stream: the clients reconnect to instance A with their
// cursor and Last-Event-ID, and A takes B's partitions over.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/gorilla/websocket"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/intents/client"
	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/schemas"
)

const (
	progressIntents = 100
	progressChunks  = 200
	progressKey     = "sk_progress_test_0123456789abcdef"
)

const progressConfig = `# cmd/switchboard/progress_integration_test.go
kafka:
  bootstrap_servers: %[2]s
  group_id: %[1]s.router
  properties:
    session.timeout.ms: "6000"
    heartbeat.interval.ms: "1000"
` + pipelineTopics + `  partitions: 6
  auto_create: true
agents:
  writer: {topic: %[1]s.agent.writer.request}
intents:
  write: {agent: writer, timeout: 3m}
router:
  delivery: exactly_once
http:
  listen: 127.0.0.1:0
  auth:
    api_keys: [{name: progress, tenant: t1, key_env: PROGRESS_TEST_KEY}]
  websocket: {send_queue: 4096, max_replays: 256, max_replays_per_tenant: 256}
log:
  level: info
`

// intentView is what one client saw of one intent: progress sequences in
// the order received, and whether and when the result came.
type intentView struct {
	seqs      []int64
	result    *schemas.IntentResult
	afterDone int // messages of the intent after its result
}

// judge counts missing and duplicated chunks and checks the result came
// last with the right progress_count.
func (v *intentView) judge() (missing, dup int, problem string) {
	seen := map[int64]int{}
	for i, s := range v.seqs {
		seen[s]++
		if seen[s] == 1 && i > 0 && s < v.seqs[i-1] {
			problem = fmt.Sprintf("sequence %d after %d", s, v.seqs[i-1])
		}
	}
	for s := int64(1); s <= progressChunks; s++ {
		switch n := seen[s]; {
		case n == 0:
			missing++
		case n > 1:
			dup += n - 1
		}
	}
	switch {
	case v.result == nil:
		problem = "no result"
	case v.result.ProgressCount == nil || *v.result.ProgressCount != progressChunks:
		problem = fmt.Sprintf("progress_count %v", v.result.ProgressCount)
	case v.afterDone > 0:
		problem = fmt.Sprintf("%d messages after the result", v.afterDone)
	}
	return missing, dup, problem
}

func TestProgressStreamsAcrossAKillApacheKafka(t *testing.T) {
	bootstrap := apacheKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "switchboard")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	prefix := "progress." + randomHex(4)
	cfgPath := filepath.Join(dir, "switchboard.yaml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, progressConfig, prefix, bootstrap), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, bin, "topics", "create", "--config", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("switchboard topics create: %v\n%s", err, out)
	}
	env := append(os.Environ(), "PROGRESS_TEST_KEY="+progressKey)
	serve := func(id string) *proc {
		return &proc{name: id, bin: bin, args: []string{"serve", "--config", cfgPath, "--instance-id", id}, env: env, logPath: filepath.Join(dir, id+".log")}
	}
	a, b := serve("router-a"), serve("router-b")
	agent := &proc{name: "agent", bin: bin, args: []string{"agent", "--config", cfgPath, "--name", "writer", "--writer", "--concurrency", "128"}, env: env, logPath: filepath.Join(dir, "agent.log")}
	all := []*proc{a, b, agent}
	t.Cleanup(func() {
		for _, p := range all {
			p.stop(20 * time.Second)
		}
		if t.Failed() {
			for _, p := range all {
				t.Logf("last lines of %s (%s):\n%s", p.name, p.logPath, p.tail(30))
			}
		}
	})
	for _, p := range []*proc{a, b} {
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*proc{a, b} {
		if err := p.waitLog(ctx, time.Minute, "partitions taken over"); err != nil {
			t.Fatal(err)
		}
	}
	if err := agent.start(); err != nil {
		t.Fatal(err)
	}
	if err := agent.waitLog(ctx, time.Minute, "demo agent running"); err != nil {
		t.Fatal(err)
	}
	addrA, addrB := apiAddr(t, a), apiAddr(t, b)
	say := func(format string, args ...any) { t.Logf("progress: "+format, args...) }
	say("routers a (%s) and b (%s), the writer agent; topics %s.*", addrA, addrB, prefix)

	ids := make([]string, progressIntents)
	for i := range ids {
		ids[i] = intents.NewID()
	}

	// The clients, on B. They reconnect to A when B goes.
	var chunks atomic.Int64
	ws := &wsFollower{t: t, ids: ids, views: map[string]*intentView{}, chunks: &chunks}
	if err := ws.connect(ctx, addrB, ""); err != nil {
		t.Fatal(err)
	}
	sse := make([]*sseFollower, len(ids))
	for i, id := range ids {
		sse[i] = &sseFollower{id: id, view: &intentView{}}
		if err := sse[i].open(ctx, addrB); err != nil {
			t.Fatal(err)
		}
	}
	var clients sync.WaitGroup
	clients.Add(1 + len(sse))
	go func() { defer clients.Done(); ws.run(ctx, addrA) }()
	for _, s := range sse {
		go func() { defer clients.Done(); s.run(ctx, addrA) }()
	}

	codec, err := schemas.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := client.NewPublisher(kafkaio.Settings{Bootstrap: bootstrap, ClientID: "progress-test"}, codec, prefix+".intent.request")
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	payload := schemas.JSON(fmt.Sprintf(`{"words":%d,"delay_ms":20}`, progressChunks))
	var pubs sync.WaitGroup
	for _, id := range ids {
		pubs.Add(1)
		go func() {
			defer pubs.Done()
			if err := pub.Publish(ctx, &schemas.IntentRequest{IntentID: id, IntentType: "write", Payload: payload, Tenant: schemas.Ptr("t1")}); err != nil {
				t.Errorf("publish %s: %v", id, err)
			}
		}()
	}
	pubs.Wait()
	say("%d intents of %d chunks published", len(ids), progressChunks)

	// Mid-stream, kill -9 B.
	if err := waitUntil(ctx, 2*time.Minute, 10*time.Millisecond, func() bool { return chunks.Load() >= progressIntents*progressChunks/4 }); err != nil {
		t.Fatalf("the WebSocket client saw %d chunks, not a quarter of them", chunks.Load())
	}
	atKill := chunks.Load()
	bParts := ownedBy(ctx, t, bootstrap, prefix+".router", "router-b", prefix+".intent.request")
	if err := b.kill9(); err != nil {
		t.Fatal(err)
	}
	say("kill -9 router-b (partitions %v) after %d of %d chunks reached the WebSocket client", keys(bParts), atKill, progressIntents*progressChunks)

	done := make(chan struct{})
	go func() { clients.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(4 * time.Minute):
		cancel()
		<-done
		t.Errorf("the clients did not all get every result within 4 minutes")
	}

	for name, views := range map[string]func(string) *intentView{
		"websocket": func(id string) *intentView { return ws.views[id] },
		"sse":       func(id string) *intentView { return sse[indexOf(ids, id)].view },
	} {
		var missing, dup, bad, onB int
		for _, id := range ids {
			v := views(id)
			if v == nil {
				bad++
				t.Errorf("%s: saw nothing of %s", name, id)
				continue
			}
			m, d, problem := v.judge()
			missing, dup = missing+m, dup+d
			if problem != "" {
				bad++
				if bad <= 5 {
					t.Errorf("%s: intent %s: %s (seqs %d, missing %d, duplicated %d)", name, id, problem, len(v.seqs), m, d)
				}
			}
			if bParts[router.PartitionFor([]byte(id), 6)] {
				onB++
			}
		}
		say("%s: %d intents, %d chunks missing, %d duplicated, %d intents wrong; %d intents on router-b's partitions %v; reconnects %d",
			name, len(ids), missing, dup, bad, onB, keys(bParts), reconnects(name, ws, sse))
		if missing != 0 || dup != 0 || bad != 0 {
			t.Errorf("%s: %d missing, %d duplicated, %d intents wrong", name, missing, dup, bad)
		}
		if onB == 0 {
			t.Errorf("%s: no intent lived on router-b's partitions %v: the kill tested nothing", name, keys(bParts))
		}
	}
	if ws.reconnects.Load() == 0 {
		t.Error("the WebSocket client never reconnected")
	}
}

// apiAddr reads the API's address from a serve process's log.
func apiAddr(t *testing.T, p *proc) string {
	t.Helper()
	if err := p.waitLog(context.Background(), time.Minute, `msg="api listening"`); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(p.current(), "\n") {
		if strings.Contains(line, `msg="api listening"`) {
			return fieldOf(line, "addr")
		}
	}
	t.Fatalf("%s logged no API address", p.name)
	return ""
}

// ownedBy asks the broker which partitions of topic the group member with
// the given group.instance.id holds.
func ownedBy(ctx context.Context, t *testing.T, bootstrap, group, instance, topic string) map[int32]bool {
	t.Helper()
	admin, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": bootstrap})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	res, err := admin.DescribeConsumerGroups(ctx, []string{group})
	if err != nil || len(res.ConsumerGroupDescriptions) != 1 {
		t.Fatalf("describing group %s: %v", group, err)
	}
	out := map[int32]bool{}
	for _, m := range res.ConsumerGroupDescriptions[0].Members {
		if m.GroupInstanceID != instance {
			continue
		}
		for _, tp := range m.Assignment.TopicPartitions {
			if tp.Topic != nil && *tp.Topic == topic {
				out[tp.Partition] = true
			}
		}
	}
	return out
}

func keys(m map[int32]bool) []int32 {
	var out []int32
	for k := range m {
		out = append(out, k)
	}
	return out
}

func indexOf(ids []string, id string) int {
	for i, x := range ids {
		if x == id {
			return i
		}
	}
	return -1
}

func reconnects(name string, ws *wsFollower, sse []*sseFollower) int64 {
	if name == "websocket" {
		return ws.reconnects.Load()
	}
	var n int64
	for _, s := range sse {
		n += s.reconnects
	}
	return n
}

// backoff waits a little before a client tries an instance again (the
// instance is another process: there is no condition to wait for here).
func backoff(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(200 * time.Millisecond):
	}
}

func authHeader() http.Header { return http.Header{"Authorization": {"Bearer " + progressKey}} }

// wsFollower is one WebSocket client subscribed to every intent's progress.
type wsFollower struct {
	t          *testing.T
	ids        []string
	conn       *websocket.Conn
	cursor     string
	views      map[string]*intentView
	left       int
	chunks     *atomic.Int64
	reconnects atomic.Int64
}

// connect dials addr and subscribes (cursor empty) or resumes from cursor.
func (w *wsFollower) connect(ctx context.Context, addr, cursor string) error {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, _, err := websocket.DefaultDialer.DialContext(dctx, "ws://"+addr+"/v1/stream", authHeader())
	if err != nil {
		return err
	}
	w.conn = conn
	if cursor == "" {
		w.left = len(w.ids)
		return conn.WriteJSON(map[string]any{"subscribe": map[string]any{"intent_ids": w.ids, "progress": true}})
	}
	var open []string
	for _, id := range w.ids {
		if v := w.views[id]; v == nil || v.result == nil {
			open = append(open, id)
		}
	}
	return conn.WriteJSON(map[string]any{"resume": map[string]any{"cursor": cursor, "subscriptions": []any{map[string]any{"intent_ids": open, "progress": true}}}})
}

// run reads until every intent has its result, resuming on fallback when
// the connection breaks.
func (w *wsFollower) run(ctx context.Context, fallback string) {
	defer func() { _ = w.conn.Close() }()
	for w.left > 0 && ctx.Err() == nil {
		var m struct {
			Type     string                  `json:"type"`
			Cursor   string                  `json:"cursor"`
			Progress *schemas.IntentProgress `json:"progress"`
			Result   *schemas.IntentResult   `json:"result"`
			Error    *struct{ Code string }  `json:"error"`
		}
		_ = w.conn.SetReadDeadline(time.Now().Add(time.Minute))
		if err := w.conn.ReadJSON(&m); err != nil {
			_ = w.conn.Close()
			w.reconnects.Add(1)
			for ctx.Err() == nil {
				if err := w.connect(ctx, fallback, w.cursor); err == nil {
					break
				}
				backoff(ctx)
			}
			continue
		}
		if m.Cursor != "" {
			w.cursor = m.Cursor
		}
		switch m.Type {
		case "progress":
			v := w.view(m.Progress.IntentID)
			if v.result != nil {
				v.afterDone++
			}
			v.seqs = append(v.seqs, m.Progress.Sequence)
			w.chunks.Add(1)
		case "result":
			v := w.view(m.Result.IntentID)
			if v.result != nil {
				v.afterDone++
				continue
			}
			v.result = m.Result
			w.left--
		case "error":
			if m.Error != nil && m.Error.Code == "resume_unavailable" { // the instance's replays are full: again
				_ = w.conn.Close()
				backoff(ctx)
				if err := w.connect(ctx, fallback, w.cursor); err != nil {
					w.t.Errorf("resuming: %v", err)
					return
				}
				continue
			}
			w.t.Errorf("websocket error message: %+v", m.Error)
			return
		}
	}
}

func (w *wsFollower) view(id string) *intentView {
	v := w.views[id]
	if v == nil {
		v = &intentView{}
		w.views[id] = v
	}
	return v
}

// sseFollower is one event stream of one intent.
type sseFollower struct {
	id         string
	view       *intentView
	lastID     string
	resp       *http.Response
	reconnects int64
}

// open starts the stream on addr, from lastID if set, and waits for its
// first line (the stream is registered).
func (s *sseFollower) open(ctx context.Context, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/intents/"+s.id+"/events", nil)
	if err != nil {
		return err
	}
	req.Header = authHeader()
	if s.lastID != "" {
		req.Header.Set("Last-Event-ID", s.lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		_ = resp.Body.Close()
		return fmt.Errorf("GET events: %d", resp.StatusCode)
	}
	s.resp = resp
	return nil
}

// run reads events until the result, reopening on fallback (with the last
// event id) when the stream breaks or ends without the result.
func (s *sseFollower) run(ctx context.Context, fallback string) {
	for ctx.Err() == nil {
		if s.read() {
			return
		}
		s.reconnects++
		for ctx.Err() == nil {
			if err := s.open(ctx, fallback); err == nil {
				break
			}
			backoff(ctx)
		}
	}
}

// read reads the current stream; true once the result came.
func (s *sseFollower) read() bool {
	defer func() { _ = s.resp.Body.Close() }()
	sc := bufio.NewScanner(s.resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var id, event string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = line[4:]
		case strings.HasPrefix(line, "event: "):
			event = line[7:]
		case strings.HasPrefix(line, "data: "):
			data := []byte(line[6:])
			switch event {
			case "progress":
				var p schemas.IntentProgress
				if json.Unmarshal(data, &p) != nil {
					continue
				}
				if s.view.result != nil {
					s.view.afterDone++
				}
				s.view.seqs = append(s.view.seqs, p.Sequence)
				s.lastID = id
			case "result":
				var r schemas.IntentResult
				if json.Unmarshal(data, &r) == nil {
					s.view.result = &r
					return true
				}
			case "error":
				return false // slow_consumer, resume_unavailable, shutting down: reconnect
			}
		case line == "":
			id, event = "", ""
		}
	}
	return false // the stream broke or ended without the result
}
