package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/api/mcp"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// connect connects the SDK's own client, which speaks 2026-07-28
// (stateless) to a server that offers it.
func (h *harness) connect(key string, opts *sdk.ClientOptions) *sdk.ClientSession {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, opts)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: h.ts.URL + "/mcp", HTTPClient: h.client(key)}, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func TestToolsListCarriesTheCatalog(t *testing.T) {
	h := newHarness(t, nil)
	cs := h.connect(keyAcme, nil)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*sdk.Tool{}
	for _, tl := range res.Tools {
		byName[tl.Name] = tl
	}
	if len(byName) != 4 || byName["echo"].Description != "Echoes." || byName["echo"].Annotations == nil || !byName["echo"].Annotations.ReadOnlyHint {
		t.Fatalf("tools = %+v", res.Tools)
	}
	b, _ := json.Marshal(byName["fraud_check"].InputSchema)
	var s map[string]any
	_ = json.Unmarshal(b, &s)
	if s["$schema"] != "https://json-schema.org/draft/2020-12/schema" || s["$defs"] == nil || s["additionalProperties"] != false {
		t.Fatalf("fraud_check inputSchema = %s", b)
	}
	// The session handshake lists the same tools, with their task support.
	sid := h.session(keyAcme)
	r := h.post(keyAcme, sessionHdr(sid), `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`)
	if !strings.Contains(r.body, `"taskSupport":"optional"`) || !strings.Contains(r.body, `"name":"fraud_check"`) {
		t.Fatalf("tools/list in a session: %d %s", r.status, r.body)
	}
}

func TestCallOutcomes(t *testing.T) {
	h := newHarness(t, nil)
	cs := h.connect(keyAcme, nil)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if res.IsError || !strings.Contains(string(sc), `"text":"hi"`) || res.Meta["outcome"] != "answered" || res.Meta["fallback"] != false ||
		len(res.Content) != 1 || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, `"hi"`) {
		t.Fatalf("echo: %+v structured %s", res, sc)
	}
	reqs := h.pub.Requests()
	if len(reqs) != 1 || reqs[0].Tenant == nil || *reqs[0].Tenant != "acme" || !strings.HasPrefix(reqs[0].IntentID, "mcp-") || res.Meta["intent_id"] != reqs[0].IntentID {
		t.Fatalf("published %+v", reqs)
	}

	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "fraud_check", Arguments: map[string]any{"amount": 12}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || res.Meta["outcome"] != "fallback_static" || res.Meta["fallback"] != true {
		t.Fatalf("fraud_check: %+v", res)
	}

	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "fail", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || res.Meta["outcome"] != "agent_error" || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "simulated failure") {
		t.Fatalf("fail: %+v", res)
	}

	// An argument that fails the input schema: a tool error naming the
	// path, and nothing published.
	n := len(h.pub.Requests())
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "fraud_check", Arguments: map[string]any{"amount": -1}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "/amount") || len(h.pub.Requests()) != n {
		t.Fatalf("invalid argument: %+v (published %d)", res, len(h.pub.Requests())-n)
	}

	// An unknown tool is a protocol error.
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "teleport"}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Fatalf("unknown tool: %v", err)
	}
}

// TestRetriedCallIsOneIntent: the same tools/call sent twice (same session,
// same JSON-RPC id) is one intent: published once, answered twice.
func TestRetriedCallIsOneIntent(t *testing.T) {
	h := newHarness(t, nil)
	sid := h.session(keyAcme)
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"n":1}}}`
	a := h.post(keyAcme, sessionHdr(sid), call)
	b := h.post(keyAcme, sessionHdr(sid), call)
	if a.reply() == nil || b.reply() == nil {
		t.Fatalf("replies: %s / %s", a.body, b.body)
	}
	if n := len(h.pub.Requests()); n != 1 {
		t.Fatalf("published %d intents, want 1", n)
	}
	ma := a.reply()["result"].(map[string]any)["_meta"].(map[string]any)
	mb := b.reply()["result"].(map[string]any)["_meta"].(map[string]any)
	if ma["intent_id"] != mb["intent_id"] {
		t.Fatalf("two intents: %v %v", ma["intent_id"], mb["intent_id"])
	}
	// Stateless: the same id with the same arguments is the same intent;
	// other arguments are another.
	s1 := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"n":2},` + meta2026("") + `}}`
	s2 := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"n":3},` + meta2026("") + `}}`
	for _, body := range []string{s1, s1, s2} {
		if r := h.post(keyAcme, hdr2026("tools/call", "echo"), body); r.reply() == nil || r.reply()["result"] == nil {
			t.Fatalf("stateless call: %d %s", r.status, r.body)
		}
	}
	if n := len(h.pub.Requests()); n != 3 {
		t.Fatalf("published %d intents, want 3", n)
	}
}

// TestCancelledCallWritesTheCancelRecord: notifications/cancelled for a
// call in flight publishes the same cancel record as DELETE
// /v1/intents/{id}, with the caller's tenant.
func TestCancelledCallWritesTheCancelRecord(t *testing.T) {
	h := newHarness(t, nil)
	cs := h.connect(keyAcme, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "slow", Arguments: map[string]any{}})
		done <- err
	}()
	waitFor(t, func() bool { return len(h.pub.Requests()) == 1 })
	// The call's wait has begun once its timer exists on the fake clock.
	bctx, bcancel := context.WithTimeout(context.Background(), testTimeout)
	defer bcancel()
	if err := h.clock.BlockUntilContext(bctx, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled call returned a result")
	}
	waitFor(t, func() bool { return len(h.pub.Cancels()) == 1 })
	c := h.pub.Cancels()[0]
	if c.IntentID != h.pub.Requests()[0].IntentID || c.Tenant != "acme" {
		t.Fatalf("cancel %+v for %s", c, h.pub.Requests()[0].IntentID)
	}
}

// TestProgressReachesTheClientBeforeTheResult uses a fake progress source:
// each report becomes notifications/progress for the call's token, in
// order, before the result.
func TestProgressReachesTheClientBeforeTheResult(t *testing.T) {
	src := &fakeProgressSource{}
	h := newHarness(t, src.init())
	var mu syncList
	cs := h.connect(keyAcme, &sdk.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
		mu.add(r.Params.Progress)
	}})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	got := make(chan *sdk.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "slow", Arguments: map[string]any{}, Meta: sdk.Meta{"progressToken": "p1"}})
		if err != nil {
			t.Error(err)
		}
		got <- res
	}()
	id := <-src.subd
	for _, p := range []float64{0, 50, 100} {
		src.send("acme", id, mcp.Progress{Progress: p, Total: 100})
	}
	waitFor(t, func() bool { return mu.len() == 3 })
	h.results.Add(&schemas.IntentResult{IntentID: id, IntentType: "slow", Outcome: schemas.OutcomeAnswered, Answer: schemas.Ptr(schemas.JSON(`{"done":true}`)), Tenant: schemas.Ptr("acme")})
	res := <-got
	if res == nil || res.IsError || mu.values()[2] != 100 {
		t.Fatalf("result %+v after progress %v", res, mu.values())
	}
}

// TestTasks: a task-augmented call answers at once with a task whose id is
// the intent id; tasks/get, tasks/result, tasks/list and tasks/cancel read
// and act on the intent, only for its tenant.
func TestTasks(t *testing.T) {
	h := newHarness(t, nil)
	sid := h.session(keyAcme)
	r := h.post(keyAcme, sessionHdr(sid), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"k":1},"task":{"ttl":60000}}}`)
	task, _ := r.reply()["result"].(map[string]any)["task"].(map[string]any)
	if task == nil || task["taskId"] != h.pub.Requests()[0].IntentID || task["status"] == nil {
		t.Fatalf("create task: %s", r.body)
	}
	id := task["taskId"].(string)
	res := h.post(keyAcme, sessionHdr(sid), `{"jsonrpc":"2.0","id":4,"method":"tasks/result","params":{"taskId":"`+id+`"}}`)
	if !strings.Contains(res.body, `\"k\":1`) || !strings.Contains(res.body, "related-task") {
		t.Fatalf("tasks/result: %s", res.body)
	}
	get := h.post(keyAcme, sessionHdr(sid), `{"jsonrpc":"2.0","id":5,"method":"tasks/get","params":{"taskId":"`+id+`"}}`)
	if !strings.Contains(get.body, `"status":"completed"`) {
		t.Fatalf("tasks/get: %s", get.body)
	}
	list := h.post(keyAcme, sessionHdr(sid), `{"jsonrpc":"2.0","id":6,"method":"tasks/list","params":{}}`)
	if !strings.Contains(list.body, id) {
		t.Fatalf("tasks/list: %s", list.body)
	}
	// Another tenant does not see it.
	osid := h.session(keyOther)
	if r := h.post(keyOther, sessionHdr(osid), `{"jsonrpc":"2.0","id":5,"method":"tasks/get","params":{"taskId":"`+id+`"}}`); !strings.Contains(r.body, "unknown task") {
		t.Fatalf("other tenant's tasks/get: %s", r.body)
	}
	if r := h.post(keyOther, sessionHdr(osid), `{"jsonrpc":"2.0","id":6,"method":"tasks/list","params":{}}`); strings.Contains(r.body, id) {
		t.Fatalf("other tenant's tasks/list shows it: %s", r.body)
	}

	// 2026-07-28: a client declaring the extension gets a task; tasks/get
	// carries the result once terminal; tasks/cancel of a pending one
	// writes the cancel record.
	ext := `"extensions":{"io.modelcontextprotocol/tasks":{}}`
	r = h.post(keyAcme, hdr2026("tools/call", "slow"), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{},`+meta2026(ext)+`}}`)
	res2 := r.reply()["result"].(map[string]any)
	if res2["resultType"] != "task" || res2["status"] != "working" || res2["pollIntervalMs"] == nil {
		t.Fatalf("2026 task: %s", r.body)
	}
	slowID := res2["taskId"].(string)
	r = h.post(keyAcme, hdr2026("tasks/cancel", slowID), `{"jsonrpc":"2.0","id":2,"method":"tasks/cancel","params":{"taskId":"`+slowID+`",`+meta2026(ext)+`}}`)
	if r.reply()["result"] == nil || len(h.pub.Cancels()) != 1 || h.pub.Cancels()[0].IntentID != slowID {
		t.Fatalf("tasks/cancel: %s cancels %+v", r.body, h.pub.Cancels())
	}
	waitFor(t, func() bool {
		r := h.post(keyAcme, hdr2026("tasks/get", slowID), `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"`+slowID+`",`+meta2026(ext)+`}}`)
		return strings.Contains(r.body, `"status":"cancelled"`) && strings.Contains(r.body, `"isError":true`)
	})
}

func TestDerivedIDsDependOnTenantAndSession(t *testing.T) {
	h := newHarness(t, nil)
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{}}}`
	h.post(keyAcme, sessionHdr(h.session(keyAcme)), call)
	h.post(keyAcme, sessionHdr(h.session(keyAcme)), call)
	h.post(keyOther, sessionHdr(h.session(keyOther)), call)
	seen := map[string]bool{}
	for _, r := range h.pub.Requests() {
		seen[r.IntentID] = true
	}
	if len(seen) != 3 {
		t.Fatalf("intent ids %v: want 3 distinct", seen)
	}
	_ = http.StatusOK
}

// tools/call arguments that name a member twice are refused as failing the
// input schema, and nothing is published: the schema would check one value
// and an agent might read the other.
func TestToolArgumentsWithADuplicateNameAreRefused(t *testing.T) {
	h := newHarness(t, nil)
	r := h.post(keyAcme, hdr2026("tools/call", "fraud_check"), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fraud_check","arguments":{"amount":-1,"amount":12},`+meta2026("")+`}}`)
	res, _ := r.reply()["result"].(map[string]any)
	text := fmt.Sprint(res["content"])
	if res == nil || res["isError"] != true || !strings.Contains(text, `"amount" appears twice`) {
		t.Fatalf("%d %s, want a tool error naming the duplicate", r.status, r.body)
	}
	if n := len(h.pub.Requests()); n != 0 {
		t.Fatalf("%d intents published, want none", n)
	}
}
