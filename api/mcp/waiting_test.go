package mcp_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/mcp"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// gauge reads switchboard_api_waiting_callers in reg.
func gauge(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "switchboard_api_waiting_callers" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// TestWaitLimitRefusesACall: a tools/call that would wait over its
// tenant's bound is refused at once, a tool error with reason "waiting"
// and nothing published, while another tenant's call still waits; a call
// as a task does not wait and is not bounded; a slot comes back with the
// result.
func TestWaitLimitRefusesACall(t *testing.T) {
	reg := prometheus.NewRegistry()
	limit, err := api.NewWaitLimit(api.WaitLimitConfig{Max: 2, MaxPerTenant: 1}, reg)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, nil, func(c *mcp.Config) { c.WaitLimit = limit })
	acme, other := h.session(keyAcme), h.session(keyOther)
	call := func(key, sid, id, tool string) <-chan rpc {
		out := make(chan rpc, 1)
		go func() {
			out <- h.post(key, sessionHdr(sid), `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"`+tool+`","arguments":{"id":`+id+`}}}`)
		}()
		return out
	}
	first := call(keyAcme, acme, "2", "slow")
	waitFor(t, func() bool { return gauge(t, reg) == 1 && len(h.pub.Requests()) == 1 })

	r := <-call(keyAcme, acme, "3", "slow")
	res, _ := r.reply()["result"].(map[string]any)
	if res == nil || res["isError"] != true {
		t.Fatalf("the call over the bound: %s", r.body)
	}
	text := res["content"].([]any)[0].(map[string]any)["text"].(string)
	meta := res["_meta"].(map[string]any)
	if !strings.Contains(text, `overloaded (waiting): tenant "acme" already has 1 callers waiting`) ||
		meta["reason"] != "waiting" || meta["retry_after_ms"] != float64(1000) || meta["backlog_ms"] != nil {
		t.Fatalf("refusal: %q %v", text, meta)
	}
	if n := len(h.pub.Requests()); n != 1 {
		t.Fatalf("published %d intents, want 1 (the refused call's was not)", n)
	}

	second := call(keyOther, other, "2", "slow")
	waitFor(t, func() bool { return gauge(t, reg) == 2 && len(h.pub.Requests()) == 2 })
	task := h.post(keyAcme, sessionHdr(acme), `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"slow","arguments":{"n":3},"task":{"ttl":60000}}}`)
	if tk, _ := task.reply()["result"].(map[string]any)["task"].(map[string]any); tk == nil {
		t.Fatalf("a call as a task is not bounded: %s", task.body)
	}

	for _, req := range h.pub.Requests() {
		h.results.Add(&schemas.IntentResult{
			IntentID: req.IntentID, IntentType: "slow", Tenant: req.Tenant,
			Outcome: schemas.OutcomeAnswered, Answer: schemas.Ptr(schemas.JSON(`{}`)),
		})
	}
	for _, c := range []<-chan rpc{first, second} {
		r := <-c
		if res, _ := r.reply()["result"].(map[string]any); res == nil || res["isError"] == true {
			t.Fatalf("a waiting call: %s", r.body)
		}
	}
	waitFor(t, func() bool { return gauge(t, reg) == 0 })
	if r := <-call(keyAcme, acme, "5", "echo"); r.reply() == nil || r.reply()["result"].(map[string]any)["isError"] == true {
		t.Fatalf("after release: %s", r.body)
	}
}

// TestWaitLimitRefusesATaskResult: a 2025-11-25 tasks/result that would
// wait over its tenant's bound is refused at once, a JSON-RPC error with
// reason "waiting" naming only the caller's tenant, while the task goes on
// and another tenant's tasks/result still waits; a resolved task's
// tasks/result takes no slot; a slot comes back with the result.
func TestWaitLimitRefusesATaskResult(t *testing.T) {
	reg := prometheus.NewRegistry()
	limit, err := api.NewWaitLimit(api.WaitLimitConfig{Max: 2, MaxPerTenant: 1}, reg)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, nil, func(c *mcp.Config) { c.WaitLimit = limit })
	acme, other := h.session(keyAcme), h.session(keyOther)
	createTask := func(key, sid, id, tool string) string {
		r := h.post(key, sessionHdr(sid), `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"`+tool+`","arguments":{"n":`+id+`},"task":{"ttl":60000}}}`)
		tk, _ := r.reply()["result"].(map[string]any)["task"].(map[string]any)
		if tk == nil {
			t.Fatalf("create task: %s", r.body)
		}
		return tk["taskId"].(string)
	}
	rpcID := 100
	result := func(key, sid, id string) <-chan rpc {
		out := make(chan rpc, 1)
		rpcID++
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tasks/result","params":{"taskId":%q}}`, rpcID, id)
		go func() {
			out <- h.post(key, sessionHdr(sid), body)
		}()
		return out
	}
	a1, a2, o1 := createTask(keyAcme, acme, "10", "slow"), createTask(keyAcme, acme, "11", "slow"), createTask(keyOther, other, "12", "slow")
	done := createTask(keyAcme, acme, "13", "echo")
	waitFor(t, func() bool {
		r := h.post(keyAcme, sessionHdr(acme), `{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{"taskId":"`+done+`"}}`)
		return strings.Contains(r.body, `"status":"completed"`)
	})

	first := result(keyAcme, acme, a1)
	waitFor(t, func() bool { return gauge(t, reg) == 1 })
	r := <-result(keyAcme, acme, a2)
	e, _ := r.reply()["error"].(map[string]any)
	if e == nil || e["code"] != float64(-32000) {
		t.Fatalf("tasks/result over the bound: %s", r.body)
	}
	msg, data := e["message"].(string), e["data"].(map[string]any)
	if !strings.Contains(msg, `overloaded (waiting): tenant "acme" already has 1 callers waiting`) || !strings.Contains(msg, a2) ||
		strings.Contains(msg, "other") || data["reason"] != "waiting" || data["retry_after_ms"] != float64(1000) {
		t.Fatalf("refusal: %q %v", msg, data)
	}
	if r := <-result(keyAcme, acme, done); !strings.Contains(r.body, "related-task") {
		t.Fatalf("a resolved task's tasks/result over the bound: %s", r.body)
	}
	second := result(keyOther, other, o1)
	waitFor(t, func() bool { return gauge(t, reg) == 2 })

	for _, req := range h.pub.Requests() {
		h.results.Add(&schemas.IntentResult{
			IntentID: req.IntentID, IntentType: req.IntentType, Tenant: req.Tenant,
			Outcome: schemas.OutcomeAnswered, Answer: schemas.Ptr(schemas.JSON(`{}`)),
		})
	}
	for _, c := range []<-chan rpc{first, second} {
		if r := <-c; !strings.Contains(r.body, "related-task") {
			t.Fatalf("a waiting tasks/result: %s", r.body)
		}
	}
	waitFor(t, func() bool { return gauge(t, reg) == 0 })
	if r := <-result(keyAcme, acme, a2); !strings.Contains(r.body, "related-task") {
		t.Fatalf("after release: %s", r.body)
	}
}

// TestWaitLimitCountsArgumentBytes: a waiting tools/call holds its
// arguments twice (the raw body and the parsed request), counted against
// the waiting byte bounds: one more that would pass them is refused.
func TestWaitLimitCountsArgumentBytes(t *testing.T) {
	reg := prometheus.NewRegistry()
	limit, err := api.NewWaitLimit(api.WaitLimitConfig{Max: 10, MaxBytes: 1000, MaxBytesPerTenant: 100}, reg)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, nil, func(c *mcp.Config) { c.WaitLimit = limit })
	acme := h.session(keyAcme)
	args := `{"s":"` + strings.Repeat("x", 32) + `"}` // 40 bytes
	first := make(chan rpc, 1)
	go func() {
		first <- h.post(keyAcme, sessionHdr(acme), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":`+args+`}}`)
	}()
	waitFor(t, func() bool { return metric(t, reg, "switchboard_api_waiting_bytes") == 80 })
	r := h.post(keyAcme, sessionHdr(acme), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow","arguments":{"s":"0123456789"}}}`)
	res, _ := r.reply()["result"].(map[string]any)
	if res == nil || res["isError"] != true || !strings.Contains(fmt.Sprint(res["content"]), `tenant "acme"'s callers waiting here hold 80 bytes of requests, and this one's 36 would pass its http.max_waiting_bytes_per_tenant, 100`) {
		t.Fatalf("the call over the byte bound: %s", r.body)
	}
	h.results.Add(&schemas.IntentResult{
		IntentID: h.pub.Requests()[0].IntentID, IntentType: "slow", Tenant: schemas.Ptr("acme"),
		Outcome: schemas.OutcomeAnswered, Answer: schemas.Ptr(schemas.JSON(`{}`)),
	})
	<-first
	waitFor(t, func() bool { return metric(t, reg, "switchboard_api_waiting_bytes") == 0 })
}

// TestShutdownEndsAWaitingTaskResult: a 2025-11-25 tasks/result waiting
// for its task's result answers at once when the endpoint shuts down, with
// a JSON-RPC error (-32000, data reason "shutting_down") naming the task,
// which goes on; and one whose wait runs out (the intent type's timeout
// plus ResultGrace) with one of reason "no_result": never a null result.
func TestShutdownEndsAWaitingTaskResult(t *testing.T) {
	reg := prometheus.NewRegistry()
	limit, err := api.NewWaitLimit(api.WaitLimitConfig{Max: 10}, reg)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, nil, func(c *mcp.Config) { c.WaitLimit = limit })
	sid := h.session(keyAcme)
	createTask := func(rpcID int) string {
		t.Helper()
		r := h.post(keyAcme, sessionHdr(sid), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"slow","arguments":{"n":%d},"task":{"ttl":60000}}}`, rpcID, rpcID))
		tk, _ := r.reply()["result"].(map[string]any)["task"].(map[string]any)
		if tk == nil {
			t.Fatalf("create task: %s", r.body)
		}
		return tk["taskId"].(string)
	}
	result := func(rpcID int, id string) <-chan rpc {
		out := make(chan rpc, 1)
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tasks/result","params":{"taskId":%q}}`, rpcID, id)
		go func() { out <- h.post(keyAcme, sessionHdr(sid), body) }()
		return out
	}
	wantError := func(r rpc, reason, id string) {
		t.Helper()
		e, _ := r.reply()["error"].(map[string]any)
		data, _ := e["data"].(map[string]any)
		if e == nil || e["code"] != float64(-32000) || data["reason"] != reason || !strings.Contains(e["message"].(string), id) {
			t.Fatalf("want a JSON-RPC error with reason %q naming %s: %d %s", reason, id, r.status, r.body)
		}
	}
	bctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	// Once the call holds a wait slot its body has been read (the API's
	// body-read timer, on the same fake clock, is gone): the one timer
	// left is the wait's.
	timedOut := createTask(1)
	waiting := result(2, timedOut)
	waitFor(t, func() bool { return gauge(t, reg) == 1 })
	if err := h.clock.BlockUntilContext(bctx, 1); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(60*time.Second + mcp.DefaultResultGrace) // slow's timeout, then the grace
	wantError(<-waiting, "no_result", timedOut)

	stopped := createTask(3)
	waiting = result(4, stopped)
	waitFor(t, func() bool { return gauge(t, reg) == 1 })
	if err := h.clock.BlockUntilContext(bctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := h.ep.Shutdown(bctx); err != nil {
		t.Fatal(err)
	}
	r := <-waiting
	wantError(r, "shutting_down", stopped)
	if e := r.reply()["error"].(map[string]any); !strings.Contains(e["message"].(string), "shutting down") {
		t.Fatalf("the message: %s", r.body)
	}
	if n := len(h.pub.Cancels()); n != 0 {
		t.Fatalf("shutdown cancelled %d intents; they go on", n)
	}
}
