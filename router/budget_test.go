package router_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/router/routertest"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// large is a payload of about 900 KB.
var large = `{"blob":"` + strings.Repeat("x", 900_000) + `"}`

// A tenant whose pending intents hold its byte budget has its next intent
// shed at once (tenant_budget), while other tenants' and tenant-less
// intents are served; once one of its intents resolves, it is served again.
func TestTenantOverItsByteBudgetIsShed(t *testing.T) { both(t, testTenantOverItsByteBudgetIsShed) }

func testTenantOverItsByteBudgetIsShed(t *testing.T, delivery string) {
	h := start(t, strings.Replace(testConfig, "router:\n  max_pending: 3\n", "router:\n  max_pending_bytes: 8000000\n  max_pending_bytes_per_tenant: 2097152\n", 1), delivery)
	h.request("a-1", "echo", large, tenantIs("acme"))
	h.request("a-2", "echo", large, tenantIs("acme"))
	h.request("a-3", "echo", large, tenantIs("acme"))
	res := h.result(1)
	if res.IntentID != "a-3" || res.Outcome != schemas.OutcomeShed || res.Error == nil || res.Error.Code != router.CodeTenantBudget {
		t.Fatalf("acme's third intent: %+v", res)
	}
	h.request("g-1", "echo", large, tenantIs("globex"))
	h.request("n-1", "echo", large)
	h.request("n-2", "echo", large)
	for n := 1; n <= 5; n++ {
		h.wait(echoTopic, n)
	}
	if got := h.counter("switchboard_intents_tenant_budget_shed_total"); got != 1 {
		t.Fatalf("shed for the budget: %v", got)
	}
	h.answer("a-1", "echo", `{}`)
	h.wait(results, 2)
	h.request("a-4", "echo", large, tenantIs("acme"))
	if ar := h.agentRequest(echoTopic, 6); ar.IntentID != "a-4" {
		t.Fatalf("dispatched %s, want acme's a-4 once a-1 resolved", ar.IntentID)
	}
	if got := h.counter("switchboard_intents_tenant_budget_shed_total"); got != 1 {
		t.Fatalf("shed for the budget: %v", got)
	}
}

// At router.max_pending_bytes the requests partitions pause at once (not a
// tick later), and resume once the pending intents hold less than 90% of
// it; responses keep flowing meanwhile.
func TestPendingBytesBoundPausesRequests(t *testing.T) {
	h := start(t, strings.Replace(testConfig, "router:\n  max_pending: 3\n", "router:\n  max_pending_bytes: 2500000\n  max_pending_bytes_per_tenant: 2500000\n", 1), "at_least_once")
	reqTP, respTP := port.TopicPartition{Topic: requests}, port.TopicPartition{Topic: responses}
	h.request("b-1", "echo", large)
	h.request("b-2", "echo", large)
	h.wait(echoTopic, 2)
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return !s.Paused(reqTP) }); err != nil {
		t.Fatal(err)
	}
	h.request("b-3", "echo", large)
	h.wait(echoTopic, 3)
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Paused(reqTP) && !s.Paused(respTP) }); err != nil {
		t.Fatal("about 2.7 MB pending of a 2.5 MB budget: requests not paused (or responses paused too)")
	}
	if got := h.counter("switchboard_intents_pending_bytes"); got != 0 {
		t.Fatalf("the gauge moved before a tick: %v", got)
	}
	// The gauge moves on the loop's tick, which the loop may take after a
	// settle marker (two channels): wait for the gauge itself.
	h.advance(5 * time.Millisecond)
	h.waitCounter("switchboard_intents_pending_bytes", func(v float64) bool { return v >= 2_700_000 && v <= 2_800_000 },
		"pending bytes gauge, want about 3 x 900 KB")
	h.answer("b-1", "echo", `{}`)
	h.wait(results, 1)
	h.advance(5 * time.Millisecond) // 1.8 MB: below 90%
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return !s.Paused(reqTP) }); err != nil {
		t.Fatal("requests not resumed below 90% of the budget")
	}
}

// What is on its way to the loop counts against router.max_pending_bytes:
// with the loop held on its first intent, the poll goroutine pauses the
// requests partitions once that intent and the records queued behind it
// reach the bound, rather than fetching up to its queue's own bound (32 MiB)
// and having the table pass the budget by that much. Once the loop runs,
// the pending bytes stay within the budget plus the one record that
// crossed it, and requests resume below 90% of it.
func TestBytesOnTheirWayCountAgainstTheBudget(t *testing.T) {
	h := start(t, strings.Replace(testConfig, "router:\n  max_pending: 3\n", "router:\n  max_pending: 100\n  max_pending_bytes: 4000000\n  max_pending_bytes_per_tenant: 4000000\n", 1), "at_least_once")
	h.src.HoldPaused()
	reqTP := port.TopicPartition{Topic: requests}
	waiting := h.sink.Block()
	t.Cleanup(h.sink.Unblock)
	h.request("w-1", "echo", large) // the loop holds this one
	<-waiting
	for i := 2; i <= 8; i++ {
		h.request(fmt.Sprintf("w-%d", i), "echo", large)
	}
	// 900 KB each: w-1 being handled and w-2..w-4 queued hold 3.6 MB, w-5
	// crosses 4 MB; w-6..w-8 wait in Kafka.
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Paused(reqTP) && s.Pending() == 3 }); err != nil {
		t.Fatalf("requests not paused with the held loop's intents at the budget (%d records still in Kafka, paused %v)", h.src.Pending(), h.src.Paused(reqTP))
	}
	h.sink.Unblock()
	for n := 1; n <= 5; n++ {
		h.wait(echoTopic, n)
	}
	// The gauge is set on a tick: advance until one has been handled.
	for h.counter("switchboard_intents_pending_bytes") == 0 {
		h.advance(5 * time.Millisecond)
		h.settleResponse()
	}
	if got := h.counter("switchboard_intents_pending_bytes"); got < 4_000_000 || got > 4_000_000+1_000_000 {
		t.Fatalf("pending bytes %v, want the 4 MB budget plus at most the record that crossed it", got)
	}
	if !h.src.Paused(reqTP) || h.src.Pending() != 3 {
		t.Fatalf("requests fetched past the budget: paused %v, %d in Kafka", h.src.Paused(reqTP), h.src.Pending())
	}
	h.answer("w-1", "echo", `{}`)
	h.answer("w-2", "echo", `{}`)
	h.answer("w-3", "echo", `{}`)
	h.wait(results, 3)
	h.advance(5 * time.Millisecond) // 1.8 MB: below 90%, room for the three in Kafka
	for n := 6; n <= 8; n++ {
		h.wait(echoTopic, n)
	}
}

// Records on their way from the poll goroutine to the event loop are
// bounded by bytes too: while the loop is held, large requests wait in
// Kafka (every partition paused) rather than in the router's queue.
func TestPollQueueIsBoundedByBytes(t *testing.T) {
	h := start(t, strings.Replace(testConfig, "max_pending: 3", "max_pending: 100", 1), "at_least_once", router.WithQueueBytes(2_000_000))
	reqTP := port.TopicPartition{Topic: requests}
	waiting := h.sink.Block()
	t.Cleanup(h.sink.Unblock)       // before the harness stops the router, if the test fails early
	h.request("q-1", "echo", large) // the loop holds this one
	<-waiting
	h.request("q-2", "echo", large)
	h.request("q-3", "echo", large) // past 2 MB queued: a backlog, and a pause
	h.request("q-4", "echo", large)
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Paused(reqTP) && s.Pending() == 0 }); err != nil {
		t.Fatal("the poll goroutine did not pause with 2 MB of records queued for a held loop")
	}
	h.sink.Unblock()
	for n := 1; n <= 4; n++ {
		h.wait(echoTopic, n)
	}
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return !s.Paused(reqTP) }); err != nil {
		t.Fatal("not resumed once the loop caught up")
	}
}

// An exactly_once transaction is bounded by bytes: a backlog of large
// intents, taken in one wake-up (group commit) or, holding only pending
// state, left open for commit_interval, is committed after every 16 MiB of
// outputs rather than as one transaction, so that no transaction holds
// hundreds of MB (whose flush on a loaded host outlived
// transaction.timeout.ms and had the producer fenced).
func TestLargeTransactionsCommitEarly(t *testing.T) {
	// A bound of 1 MiB and intents of 100 KB keep the test quick under -race.
	defer router.SetMaxTxBytes(1 << 20)()
	payload := `{"blob":"` + strings.Repeat("x", 100_000) + `"}`
	commits := clockwork.NewFakeClock()
	h := start(t, strings.Replace(testConfig, "max_pending: 3", "max_pending: 100", 1), "exactly_once", router.WithCommitClock(commits))
	const queued = 12
	for i := 1; i <= queued; i++ {
		h.request(fmt.Sprintf("big-%d", i), "echo", payload)
	}
	// About 200 KB of outputs per intent (a dispatch, sent at once but
	// waited for by the commit, and a changelog record in the transaction):
	// the sixth of a transaction passes 1 MiB and commits it; the commit
	// clock, which never moves here, commits nothing.
	h.wait(pendingT, queued)
	b := h.tx.Batches()
	for _, n := range b {
		if n > 6 {
			t.Fatalf("committed transactions held %v outputs: one past 1 MiB (6)", b)
		}
	}
}

// settleResponse is settle through the responses topic, for tests whose
// requests partition is paused with HoldPaused: a malformed response is
// dead-lettered once everything before it was handled.
func (h *harness) settleResponse() {
	h.t.Helper()
	n := h.sink.Count(dlq)
	h.pushRaw(responses, "marker", []byte("marker"))
	h.wait(dlq, n+1)
}

// waitCounter polls a metric until cond holds, failing with what at the
// harness's deadline.
func (h *harness) waitCounter(name string, cond func(float64) bool, what string) {
	h.t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		v := h.counter(name)
		if cond(v) {
			return
		}
		select {
		case <-tick.C:
		case <-h.ctx.Done():
			h.t.Fatalf("%s: still %v", what, v)
		}
	}
}
