package main

// The WebSocket stream on Kafka (the real broker in the integration tests,
// the embedded one in the fast ones): two API instances, each reading every
// partition of the results and timeouts topics, and a client that drops its
// connection to one and resumes on the other.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/apitest"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// streamEnv is a pair of topics on the real broker and API instances
// reading them.
type streamEnv struct {
	t        *testing.T
	ctx      context.Context
	kafka    kafkaio.Settings
	codec    *schemas.Codec
	prod     *kafkaio.Producer
	results  string
	timeouts string
	progress string
}

func newStreamEnv(t *testing.T, bootstrap string) *streamEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	prefix := "ws." + hex.EncodeToString(b)
	e := &streamEnv{
		t: t, ctx: ctx, kafka: kafkaio.Settings{Bootstrap: bootstrap, ClientID: "stream-test"},
		results: prefix + ".results", timeouts: prefix + ".timeouts", progress: prefix + ".progress",
	}
	if _, err := kafkaio.CreateTopics(ctx, e.kafka, []kafkaio.TopicSpec{
		{Name: e.results, Partitions: 3, ReplicationFactor: 1},
		{Name: e.timeouts, Partitions: 3, ReplicationFactor: 1},
		{Name: e.progress, Partitions: 3, ReplicationFactor: 1},
	}); err != nil {
		t.Fatal(err)
	}
	var err error
	if e.codec, err = schemas.NewCodec(); err != nil {
		t.Fatal(err)
	}
	if e.prod, err = kafkaio.NewProducer(e.kafka); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.prod.Close(5 * time.Second) })
	return e
}

// instance starts an API server fed by its own reader of both topics.
func (e *streamEnv) instance() (*api.Server, *api.Results, string) {
	e.t.Helper()
	results := api.NewResults(10_000)
	reg := prometheus.NewRegistry()
	order, err := api.NewFeed(results, api.FeedConfig{Registerer: reg})
	if err != nil {
		e.t.Fatal(err)
	}
	feed := &resultsFeed{
		kafka: e.kafka, codec: e.codec, results: results, order: order, log: slog.New(slog.DiscardHandler),
		topicRes: e.results, topicTO: e.timeouts, topicProg: e.progress,
	}
	srv, err := api.New(api.Config{Listen: "127.0.0.1:0", SendQueue: 4096}, &apitest.Publisher{}, results,
		api.WithHistory(feed), api.WithRegisterer(reg), api.WithGatherer(reg), api.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- feed.run(ctx) }()
	ts := httptest.NewServer(srv.Handler())
	e.t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = srv.Shutdown(sctx)
		ts.Close()
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("feed: %v", err)
		}
	})
	eventually(e.t, "the feed to start", func() bool { return len(results.Position().Results) == 3 })
	return srv, results, "ws" + strings.TrimPrefix(ts.URL, "http") + "/v1/stream"
}

// produce writes results of a session with ids <session>-<i> for i in
// [from, to), from a few goroutines.
func (e *streamEnv) produce(session string, from, to int) {
	e.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := from + w; i < to; i += 8 {
				id := fmt.Sprintf("%s-%05d", session, i)
				res := &schemas.IntentResult{
					IntentID: id, IntentType: "echo", Agent: "echo", Outcome: schemas.OutcomeAnswered,
					SessionID: schemas.Ptr(session), Attempts: 1, Timeline: schemas.Timeline{ReceivedAt: 1, ResolvedAt: 2, Deadline: 3},
				}
				v, err := e.codec.Encode(e.results, res)
				if err == nil {
					err = e.prod.Send(e.ctx, e.results, []byte(id), v, nil, time.Time{})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		e.t.Fatal(err)
	}
}

type streamMsg struct {
	Type     string                `json:"type"`
	Cursor   string                `json:"cursor"`
	Replayed int                   `json:"replayed"`
	Result   *schemas.IntentResult `json:"result"`
	Error    *struct {
		Code     string `json:"code"`
		Earliest string `json:"earliest"`
	} `json:"error"`
}

func dialStream(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func readStream(t *testing.T, c *websocket.Conn) streamMsg {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, b, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var m streamMsg
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if m.Cursor == "" {
		t.Fatalf("message without a cursor: %s", b)
	}
	return m
}

// testStreamResumeAcrossInstances: a client drops its connection to one
// instance with results in flight and resumes on another while more arrive;
// it gets each of total results once, and both instances read them all.
func testStreamResumeAcrossInstances(t *testing.T, bootstrap string, total int) {
	e := newStreamEnv(t, bootstrap)
	_, resA, urlA := e.instance()
	_, resB, urlB := e.instance()
	third := total / 3

	seen := map[string]int{}
	var cursor string
	take := func(m streamMsg) {
		t.Helper()
		cursor = m.Cursor
		if m.Type == "result" {
			if seen[m.Result.IntentID]++; seen[m.Result.IntentID] > 1 {
				t.Fatalf("result %s received twice", m.Result.IntentID)
			}
		}
	}

	a := dialStream(t, urlA)
	_ = a.WriteMessage(websocket.TextMessage, []byte(`{"subscribe":{"session_id":"s"}}`))
	if m := readStream(t, a); m.Type != "subscribed" {
		t.Fatalf("got %+v", m)
	} else {
		take(m)
	}
	e.produce("s", 0, third)
	e.produce("other", 0, 200)
	for len(seen) < third/2 {
		take(readStream(t, a))
	}
	_ = a.UnderlyingConn().Close() // dropped, with results in flight
	e.produce("s", third, 2*third)

	b := dialStream(t, urlB)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // more results while the client resumes on the other instance
		defer wg.Done()
		e.produce("s", 2*third, total)
	}()
	_ = b.WriteMessage(websocket.TextMessage,
		[]byte(`{"resume":{"cursor":"`+cursor+`","subscriptions":[{"session_id":"s"}]}}`))
	resumed, replayed := false, 0
	for len(seen) < total || !resumed {
		m := readStream(t, b)
		switch m.Type {
		case "resumed":
			resumed, replayed = true, m.Replayed
		case "result":
			if !strings.HasPrefix(m.Result.IntentID, "s-") {
				t.Fatalf("result of another session: %s", m.Result.IntentID)
			}
		default:
			t.Fatalf("unexpected %+v", m)
		}
		take(m)
	}
	wg.Wait()
	// Nothing after the last: an acknowledgement comes next, not a duplicate.
	_ = b.WriteMessage(websocket.TextMessage, []byte(`{"subscribe":{"intent_ids":["none"]}}`))
	if m := readStream(t, b); m.Type != "subscribed" {
		t.Fatalf("after all %d results got %+v", total, m)
	}
	t.Logf("resume on the other instance: %d results before the drop, %d replayed from Kafka, the rest live; none missing, none twice",
		third/2, replayed)

	// Both instances read every result, whoever's client asked.
	eventually(t, "both instances to hold every result", func() bool {
		for i := range total {
			id := fmt.Sprintf("s-%05d", i)
			if _, ok := resA.Get("", id); !ok {
				return false
			}
			if _, ok := resB.Get("", id); !ok {
				return false
			}
		}
		return true
	})
}

// testStreamResumePastRetention: records deleted past a client's cursor give
// cursor_expired with the earliest position, from which it can resume.
func testStreamResumePastRetention(t *testing.T, bootstrap string) {
	e := newStreamEnv(t, bootstrap)
	_, res, url := e.instance()
	c := dialStream(t, url)
	_ = c.WriteMessage(websocket.TextMessage, []byte(`{"subscribe":{"session_id":"r"}}`))
	start := readStream(t, c).Cursor
	_ = c.Close()
	e.produce("r", 0, 60)
	eventually(t, "the feed to read them", func() bool {
		p := res.Position()
		return p.Results[0]+p.Results[1]+p.Results[2] == 60
	})
	end := res.Position()

	admin, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": e.kafka.Bootstrap})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var del []kafka.TopicPartition
	for p, off := range end.Results {
		del = append(del, kafka.TopicPartition{Topic: &e.results, Partition: int32(p), Offset: kafka.Offset(off / 2)})
	}
	if _, err := admin.DeleteRecords(e.ctx, del); err != nil {
		t.Fatal(err)
	}

	c2 := dialStream(t, url)
	msg := `{"resume":{"cursor":"` + start + `","subscriptions":[{"session_id":"r"}]}}`
	_ = c2.WriteMessage(websocket.TextMessage, []byte(msg))
	m := readStream(t, c2)
	want := api.Position{Results: []int64{end.Results[0] / 2, end.Results[1] / 2, end.Results[2] / 2}, Timeouts: []int64{0, 0, 0}, Progress: []int64{0, 0, 0}}
	if m.Type != "error" || m.Error.Code != "cursor_expired" || m.Error.Earliest != want.String() {
		t.Fatalf("got %+v, want cursor_expired with earliest %s", m, want)
	}
	_ = c2.WriteMessage(websocket.TextMessage,
		[]byte(`{"resume":{"cursor":"`+m.Error.Earliest+`","subscriptions":[{"session_id":"r"}]}}`))
	n := 0
	for m = readStream(t, c2); m.Type == "result"; m = readStream(t, c2) {
		n++
	}
	if kept := 60 - int(want.Results[0]+want.Results[1]+want.Results[2]); m.Type != "resumed" || n != kept {
		t.Fatalf("from earliest: %d results then %+v, want %d then resumed", n, m, kept)
	}
}
