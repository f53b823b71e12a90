package router_test

import (
	"errors"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/router/routertest"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// Dispatch at once (issue 16): under exactly_once an intent's dispatch goes
// to its agent outside the transaction, and the transaction that holds the
// intent's pending state commits only once the dispatch is acknowledged.

// The agent sees the dispatch while the transaction that holds the
// intent's pending state is open; that transaction, holding pending state
// only, is not committed at once, so the answer resolves the intent in the
// same transaction.
func TestDispatchVisibleBeforeItsTransactionCommits(t *testing.T) {
	h, _ := startGroupCommit(t)
	h.request("n-1", "echo", `{}`)
	d := h.wait(echoTopic, 1)
	if string(d.Key) != "n-1" {
		t.Fatalf("dispatch keyed %q", d.Key)
	}
	if c, _, _ := h.tx.Counts(); c != 0 || h.sink.Count(pendingT) != 0 {
		t.Fatalf("%d commits and %d pending records once the dispatch is visible, want 0 and 0", c, h.sink.Count(pendingT))
	}
	if got := h.tx.AtOnce(); got != 1 {
		t.Fatalf("%d outputs sent outside the transaction, want 1 (the dispatch)", got)
	}
	h.answer("n-1", "echo", `{"ok":true}`)
	if res := h.result(1); res.Outcome != schemas.OutcomeAnswered {
		t.Fatalf("outcome %s", res.Outcome)
	}
	// Pending state, result and resolved state in one transaction.
	if got := h.tx.Batches(); len(got) != 1 || got[0] != 3 {
		t.Fatalf("committed transactions held %v outputs, want [3]", got)
	}
}

// A commit waits for the broker to acknowledge the dispatches sent since
// the last commit: until then the intent's pending state, its result and
// the records' offsets stay uncommitted.
func TestCommitWaitsForAnUnackedDispatch(t *testing.T) {
	h, commits := startGroupCommit(t)
	h.sink.Hold()
	t.Cleanup(h.sink.Release) // before the router's stop, which commits
	h.request("w-1", "echo", `{}`)
	h.wait(echoTopic, 1)
	h.answer("w-1", "echo", `{"ok":true}`) // a result: committed at once
	// The commit waits on the commit clock (its bound): the ticker and that
	// timer are its two waiters.
	if err := commits.BlockUntilContext(h.ctx, 2); err != nil {
		t.Fatalf("the commit never waited for the dispatch's acknowledgement: %v", err)
	}
	reqTP := port.TopicPartition{Topic: requests}
	if c, _, _ := h.tx.Counts(); c != 0 || h.sink.Count(results) != 0 || h.src.Stored(reqTP) != -1 {
		t.Fatalf("%d commits, %d results, requests offset %d before the dispatch was acknowledged", c, h.sink.Count(results), h.src.Stored(reqTP))
	}
	h.sink.Release()
	h.result(1)
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Stored(reqTP) == 1 }); err != nil {
		t.Fatalf("the request's offset was not committed after the acknowledgement: %v", err)
	}
	waitCounter(h, "switchboard_transaction_dispatch_wait_seconds", 1)
}

// The offsets go to the transaction while the dispatch is being
// acknowledged: only the transaction's end waits for the acknowledgement.
func TestOffsetsAreSentBeforeTheDispatchIsAcked(t *testing.T) {
	h, commits := startGroupCommit(t)
	h.sink.Hold()
	t.Cleanup(h.sink.Release) // before the router's stop, which commits
	h.request("o-1", "echo", `{}`)
	h.wait(echoTopic, 1)
	h.answer("o-1", "echo", `{"ok":true}`) // a result: committed at once
	// The commit waits for the acknowledgement on the commit clock.
	if err := commits.BlockUntilContext(h.ctx, 2); err != nil {
		t.Fatalf("the commit never waited for the dispatch's acknowledgement: %v", err)
	}
	reqTP, respTP := port.TopicPartition{Topic: requests}, port.TopicPartition{Topic: responses}
	sent := h.tx.OffsetsSent()
	if len(sent) != 1 || sent[0][reqTP] != 1 || sent[0][respTP] != 1 {
		t.Fatalf("offsets sent before the dispatch was acknowledged: %v, want requests and responses at 1", sent)
	}
	if c, _, _ := h.tx.Counts(); c != 0 || h.sink.Count(results) != 0 || h.src.Stored(reqTP) != -1 {
		t.Fatalf("%d commits, %d results, requests offset %d before the dispatch was acknowledged", c, h.sink.Count(results), h.src.Stored(reqTP))
	}
	h.sink.Release()
	h.result(1)
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Stored(respTP) == 1 }); err != nil {
		t.Fatalf("the response's offset was not committed after the acknowledgement: %v", err)
	}
	if got := len(h.tx.OffsetsSent()); got != 1 {
		t.Fatalf("offsets sent %d times, want once", got)
	}
}

// A dispatch the broker does not acknowledge in time fails the transaction:
// it is aborted and its work redone.
func TestUnackedDispatchTimesOutAndIsRedone(t *testing.T) {
	h, commits := startGroupCommit(t)
	h.sink.Hold()
	h.request("u-1", "echo", `{}`)
	h.wait(echoTopic, 1)
	commits.Advance(10 * time.Second) // commit_interval: the commit starts, and waits
	if err := commits.BlockUntilContext(h.ctx, 2); err != nil {
		t.Fatal(err)
	}
	commits.Advance(15 * time.Second)
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Seeks() > 0 }); err != nil {
		t.Fatal("no rewind after a dispatch was never acknowledged")
	}
	if c, aborts, _ := h.tx.Counts(); c != 0 || aborts != 1 || h.sink.Count(pendingT) != 0 {
		t.Fatalf("commits %d, aborts %d, pending records %d: want 0, 1, 0", c, aborts, h.sink.Count(pendingT))
	}
	h.sink.Release() // the late acknowledgement belongs to the dropped work
	h.offset[requests] = 0
	h.request("u-1", "echo", `{}`)
	h.wait(echoTopic, 2)
	h.answer("u-1", "echo", `{"ok":true}`)
	h.result(1)
	if n := h.sink.Count(echoTopic); n != 2 {
		t.Fatalf("%d dispatches, want 2 (the first, then the redo's)", n)
	}
}

// A dispatch the broker refuses fails the transaction that holds its
// intent: aborted, rewound, and the intent redone with one result.
func TestFailedDispatchAbortsAndRedoes(t *testing.T) {
	h, _ := startGroupCommit(t)
	h.sink.FailTopic(echoTopic, errors.New("broker says no"))
	h.request("f-1", "echo", `{}`)
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Seeks() > 0 }); err != nil {
		t.Fatal("no rewind after a failed dispatch")
	}
	if c, aborts, _ := h.tx.Counts(); c != 0 || aborts != 1 || h.sink.Count(pendingT) != 0 {
		t.Fatalf("commits %d, aborts %d, pending records %d: want 0, 1, 0", c, aborts, h.sink.Count(pendingT))
	}
	h.sink.FailTopic(echoTopic, nil)
	h.offset[requests] = 0
	h.request("f-1", "echo", `{}`)
	h.wait(echoTopic, 2)
	h.answer("f-1", "echo", `{"ok":true}`)
	if res := h.result(1); res.Outcome != schemas.OutcomeAnswered {
		t.Fatalf("outcome %s", res.Outcome)
	}
	h.settle()
	if n := h.sink.Count(results); n != 1 {
		t.Fatalf("%d results, want 1", n)
	}
	if got := h.counter("switchboard_delivery_failures_total"); got != 1 {
		t.Fatalf("delivery failures = %v, want 1", got)
	}
}

// Results are not sent at once: a result and the response's offset become
// visible together, when their transaction commits.
func TestResultsCommitWithTheirOffsets(t *testing.T) {
	h, _ := startGroupCommit(t)
	h.request("r-1", "echo", `{}`)
	h.wait(echoTopic, 1)
	blocked := h.tx.BlockCommits()
	t.Cleanup(h.tx.UnblockCommits)
	h.answer("r-1", "echo", `{"ok":true}`)
	select {
	case <-blocked:
	case <-h.ctx.Done():
		t.Fatal("the result's transaction was never committed")
	}
	respTP := port.TopicPartition{Topic: responses}
	if n := h.sink.Count(results); n != 0 || h.src.Stored(respTP) != -1 {
		t.Fatalf("%d results, responses offset %d before their commit", n, h.src.Stored(respTP))
	}
	h.tx.UnblockCommits()
	h.result(1)
	// The test sink's commit makes the outputs visible, then stores the
	// offsets: wait for the second, as a reader of both would.
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Stored(respTP) == 1 }); err != nil {
		t.Fatalf("responses offset %d once the result is visible, want 1: %v", h.src.Stored(respTP), err)
	}
	if got := h.tx.AtOnce(); got != 1 {
		t.Fatalf("%d outputs sent outside transactions, want 1 (the dispatch)", got)
	}
}
