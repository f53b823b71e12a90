package main

// MCP tasks answered by any instance (issue 17): a task created through one
// instance's MCP endpoint is read (tasks/get, tasks/result) through
// another's, which started after the task resolved (so its memory never
// saw it: its lookup store answers), and again after that instance
// restarted on its store; a pending task is "working" there, from the
// pending changelog.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/apitest"
	"github.com/switchboard-mcp/switchboard/api/lookup"
	"github.com/switchboard-mcp/switchboard/api/mcp"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/schemas"
)

func TestMCPTasksAnsweredByAnyInstanceEmbedded(t *testing.T) {
	e := newStreamEnv(t, embeddedBootstrap(t))
	pending := e.results + ".pending"
	if _, err := kafkaio.CreateTopics(e.ctx, e.kafka, []kafkaio.TopicSpec{{Name: pending, Partitions: 3, ReplicationFactor: 1}}); err != nil {
		t.Fatal(err)
	}
	// Instance 1's publisher plays the router: an echo intent's result goes
	// to the results topic, a slow one's dispatched state to the pending
	// changelog.
	deadline := time.Now().Add(time.Hour).UnixMilli()
	pub := &apitest.Publisher{Func: func(ctx context.Context, req *schemas.IntentRequest) error {
		topic, key := e.results, []byte(req.IntentID)
		var rec schemas.Record = apitest.Result(req, `{"echo":true}`)
		if req.IntentType == "slow" {
			topic = pending
			rec = &schemas.PendingIntent{
				IntentID: req.IntentID, IntentType: req.IntentType, Agent: "slow", RecordTs: 1,
				ReceivedAt: 1, DispatchedAt: 2, Deadline: deadline, Attempt: 1, Payload: req.Payload,
			}
		}
		v, err := e.codec.Encode(topic, rec)
		if err != nil {
			return err
		}
		return e.prod.Send(ctx, topic, key, v, nil, time.Time{})
	}}
	one := e.mcpInstance(pub, pending, t.TempDir())
	sid := one.session()
	done := one.createTask(sid, "echo")
	working := one.createTask(sid, "slow")
	eventually(t, "instance 1 to read the echo task's result", func() bool {
		return strings.Contains(one.call(sid, "tasks/get", done).body, `"status":"completed"`)
	})

	dir := t.TempDir()
	two := e.mcpInstance(&apitest.Publisher{}, pending, dir)
	check := func(inst *mcpInstance, when string) {
		t.Helper()
		sid := inst.session()
		eventually(t, when+": tasks/get of the resolved task", func() bool {
			return strings.Contains(inst.call(sid, "tasks/get", done).body, `"status":"completed"`)
		})
		if r := inst.call(sid, "tasks/result", done); !strings.Contains(r.body, `\"echo\":true`) {
			t.Fatalf("%s: tasks/result of the resolved task: %s", when, r.body)
		}
		if r := inst.call(sid, "tasks/get", working); !strings.Contains(r.body, `"status":"working"`) {
			t.Fatalf("%s: tasks/get of the pending task: %s", when, r.body)
		}
		if r := inst.call(sid, "tasks/get", "no-such-task"); !strings.Contains(r.body, "unknown task") {
			t.Fatalf("%s: tasks/get of an unknown task: %s", when, r.body)
		}
	}
	check(two, "instance 2, started after the task resolved")
	two.stop()
	check(e.mcpInstance(&apitest.Publisher{}, pending, dir), "instance 2 after a restart")
}

// With authentication off every intent is visible (tasks/get finds any
// tenant's), so tasks/list lists every tenant's recent intents from the
// store too, not only those without a tenant (as it did); newest first.
func TestMCPTasksListWithoutAuthListsEveryTenantsEmbedded(t *testing.T) {
	e := newStreamEnv(t, embeddedBootstrap(t))
	pending := e.results + ".pending"
	if _, err := kafkaio.CreateTopics(e.ctx, e.kafka, []kafkaio.TopicSpec{{Name: pending, Partitions: 3, ReplicationFactor: 1}}); err != nil {
		t.Fatal(err)
	}
	acme := "acme"
	for i, res := range []*schemas.IntentResult{
		{IntentID: "free-1", IntentType: "echo", Agent: "echo", Outcome: schemas.OutcomeAnswered, Attempts: 1},
		{IntentID: "acme-1", IntentType: "echo", Agent: "echo", Outcome: schemas.OutcomeAnswered, Attempts: 1, Tenant: &acme},
		{IntentID: "free-2", IntentType: "echo", Agent: "echo", Outcome: schemas.OutcomeAnswered, Attempts: 1},
	} {
		res.Answer = schemas.Ptr(schemas.JSON(`{"echo":true}`))
		res.Timeline = schemas.Timeline{ReceivedAt: int64(1000 + i), ResolvedAt: int64(1010 + i), Deadline: int64(3000 + i)}
		v, err := e.codec.Encode(e.results, res)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.prod.Send(e.ctx, e.results, []byte(res.IntentID), v, nil, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	inst := e.mcpInstance(&apitest.Publisher{}, pending, t.TempDir())
	sid := inst.session()
	r := inst.post(sid, `{"jsonrpc":"2.0","id":4,"method":"tasks/list","params":{}}`)
	var msg struct {
		Result struct {
			Tasks []struct {
				TaskID string `json:"taskId"`
				Status string `json:"status"`
			} `json:"tasks"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(rpcBody(r.body)), &msg); err != nil {
		t.Fatalf("tasks/list: %v: %s", err, r.body)
	}
	var got []string
	for _, task := range msg.Result.Tasks {
		got = append(got, task.TaskID+":"+task.Status)
	}
	if want := []string{"free-2:completed", "acme-1:completed", "free-1:completed"}; !slices.Equal(got, want) {
		t.Fatalf("tasks/list without authentication: %v, want %v", got, want)
	}
}

// mcpInstance is an API server with the MCP endpoint, its memory and
// lookup store fed from the env's topics, as serve wires them.
type mcpInstance struct {
	t    *testing.T
	url  string
	stop func()
}

func (e *streamEnv) mcpInstance(pub api.Publisher, pending, dir string) *mcpInstance {
	e.t.Helper()
	log := slog.New(slog.DiscardHandler)
	results := api.NewResults(10_000)
	store, err := lookup.Open(dir, lookup.WithLogger(log))
	if err != nil {
		e.t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	order, err := api.NewFeed(results, api.FeedConfig{Registerer: reg})
	if err != nil {
		e.t.Fatal(err)
	}
	feed, err := newResultsFeed(e.kafka, e.codec, log, order, store,
		feedTopics{Results: e.results, Timeouts: e.timeouts, Progress: e.progress, Pending: pending})
	if err != nil {
		e.t.Fatal(err)
	}
	cat := api.Catalog{IntentTypes: []api.IntentTypeInfo{
		{Name: "echo", Agent: "echo", TimeoutMs: 2000, Description: "Echoes."},
		{Name: "slow", Agent: "slow", TimeoutMs: 60000, Description: "Never answers."},
	}}
	ep, err := mcp.New(mcp.Config{
		Catalog: cat, Publisher: pub, Results: results, Lookup: api.NewIntentLookup(results, store), Logger: log,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	srv, err := api.New(api.Config{Listen: "127.0.0.1:0"}, pub, results, api.WithMCP(ep), api.WithLookup(store),
		api.WithCatalog(cat), api.WithHistory(feed), api.WithRegisterer(reg), api.WithGatherer(reg), api.WithLogger(log))
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	fed := make(chan error, 1)
	go func() { fed <- feed.run(ctx) }()
	ts := httptest.NewServer(srv.Handler())
	inst := &mcpInstance{t: e.t, url: ts.URL}
	stopped := false
	inst.stop = func() {
		if stopped {
			return
		}
		stopped = true
		ts.CloseClientConnections()
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = srv.Shutdown(sctx)
		ts.Close()
		cancel()
		if err := <-fed; err != nil {
			e.t.Errorf("feed: %v", err)
		}
		if err := store.Close(); err != nil {
			e.t.Errorf("store: %v", err)
		}
	}
	e.t.Cleanup(inst.stop)
	eventually(e.t, "the lookup store to catch up", func() bool { return store.Ready() })
	return inst
}

type mcpReply struct {
	header http.Header
	body   string
}

// post sends one JSON-RPC message to /mcp (headers: the session's).
func (m *mcpInstance) post(sid, body string) mcpReply {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, m.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		m.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return mcpReply{header: resp.Header, body: string(b)}
}

// session opens a 2025-11-25 session.
func (m *mcpInstance) session() string {
	m.t.Helper()
	r := m.post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := r.header.Get("Mcp-Session-Id")
	if sid == "" {
		m.t.Fatalf("initialize: %s", r.body)
	}
	m.post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return sid
}

// createTask calls tool name as a task and returns the task's id (the
// JSON-RPC id names the call: one intent per id and session).
func (m *mcpInstance) createTask(sid, name string) string {
	m.t.Helper()
	r := m.post(sid, `{"jsonrpc":"2.0","id":"`+name+`","method":"tools/call","params":{"name":"`+name+`","arguments":{},"task":{"ttl":60000}}}`)
	var msg struct {
		Result struct {
			Task struct {
				TaskID string `json:"taskId"`
			} `json:"task"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(rpcBody(r.body)), &msg); err != nil || msg.Result.Task.TaskID == "" {
		m.t.Fatalf("create task %s: %s", name, r.body)
	}
	return msg.Result.Task.TaskID
}

// call sends a tasks/* request for task id.
func (m *mcpInstance) call(sid, method, id string) mcpReply {
	m.t.Helper()
	b, _ := json.Marshal(id)
	return m.post(sid, `{"jsonrpc":"2.0","id":3,"method":"`+method+`","params":{"taskId":`+string(b)+`}}`)
}

// rpcBody is the JSON-RPC message of a reply, plain or the data line of an
// event stream.
func rpcBody(body string) string {
	sc := bufio.NewScanner(bytes.NewReader([]byte(body)))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && d != "" {
			return d
		}
	}
	return body
}
