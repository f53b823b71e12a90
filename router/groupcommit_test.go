package router_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/router/routertest"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// groupCommitConfig has a commit_interval no test waits for: its commits
// come from the group commit alone, on a fake commit clock that never moves
// unless the test says so.
const groupCommitConfig = `
agents:
  echo: {}
intents:
  echo: {agent: echo, timeout: 2s}
topics:
  partitions: 1
router:
  max_pending: 1000
  commit_interval: 10s
`

// startGroupCommit starts an exactly_once router whose commit clock is a
// fake of its own, with its ticker already waiting on it.
func startGroupCommit(t *testing.T) (*harness, *clockwork.FakeClock) {
	t.Helper()
	commits := clockwork.NewFakeClockAt(t0)
	h := start(t, groupCommitConfig, config.ExactlyOnce, router.WithCommitClock(commits))
	if err := commits.BlockUntilContext(h.ctx, 1); err != nil {
		t.Fatal(err)
	}
	return h, commits
}

// An idle router commits a transaction as soon as it holds an output a
// reader waits for: each result becomes visible with neither clock
// moving, in a transaction of its own (with its intent's pending state,
// which alone does not commit: the dispatch went out at once).
func TestGroupCommitIdleCommitsAtOnce(t *testing.T) {
	h, _ := startGroupCommit(t)
	for i, id := range []string{"g-1", "g-2"} {
		h.request(id, "echo", `{}`)
		h.wait(echoTopic, i+1)
		h.answer(id, "echo", `{"ok":true}`)
		if res := h.result(i + 1); res.Outcome != schemas.OutcomeAnswered {
			t.Fatalf("outcome %s", res.Outcome)
		}
	}
	// Pending state + result + resolved state, twice.
	if got := h.tx.Batches(); len(got) != 2 || got[0] != 3 || got[1] != 3 {
		t.Fatalf("committed transactions held %v outputs, want [3 3]", got)
	}
	waitCounter(h, "switchboard_transaction_outputs", 2)
	if got := h.counter("switchboard_transactions_total", "result", "committed"); got != 2 {
		t.Fatalf("committed transactions metric = %v, want 2", got)
	}
}

// Under load, what arrives while a commit is in flight waits for it and goes
// into the next transaction together: one commit at a time, batches that
// grow with the backlog.
func TestGroupCommitBatchesWhileACommitIsInFlight(t *testing.T) {
	h, commits := startGroupCommit(t)
	h.request("g-0", "echo", `{}`)
	h.wait(echoTopic, 1)
	blocked := h.tx.BlockCommits()
	t.Cleanup(h.tx.UnblockCommits) // before the router's stop, which commits
	h.answer("g-0", "echo", `{}`)
	select {
	case <-blocked:
	case <-h.ctx.Done():
		t.Fatal("the first intent's transaction was never committed")
	}
	const queued = 20
	for i := 1; i <= queued; i++ {
		h.request("g-"+strconv.Itoa(i), "echo", `{}`)
	}
	// Every record has been polled: they wait for the event loop, which
	// waits for the commit.
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Pending() == 0 }); err != nil {
		t.Fatal(err)
	}
	// Only g-0 was handled: its dispatch went out at once, its pending
	// state and result wait for the commit.
	if got, pend := h.sink.Count(echoTopic), h.sink.Count(pendingT); got != 1 || pend != 0 {
		t.Fatalf("%d dispatches and %d pending records visible before the first commit finished, want 1 and 0", got, pend)
	}
	h.tx.UnblockCommits()
	h.wait(echoTopic, queued+1)
	// The queued intents' pending state alone waits for commit_interval.
	commits.Advance(10 * time.Second)
	h.wait(pendingT, 2+queued)

	b := h.tx.Batches()
	// The first transaction holds g-0 (pending state, result, resolved
	// state); the next one what queued behind it (the poll goroutine may
	// still have held the last record: one more).
	if len(b) < 2 || len(b) > 3 || b[0] != 3 || b[1] < queued-1 {
		t.Fatalf("committed transactions held %v outputs, want [3 ≥%d] and at most one more", b, queued-1)
	}
	if got := h.tx.MaxConcurrentCommits(); got != 1 {
		t.Fatalf("%d commits ran at once, want 1", got)
	}
	// Observed once Commit has returned, just after the outputs show.
	waitCounter(h, "switchboard_transaction_records", float64(len(b)))
}

// A transaction that holds no outputs, only moved positions (a response for
// an intent nobody knows), is not committed at once: commit_interval bounds
// how long it waits.
func TestGroupCommitPositionsOnlyWaitForTheInterval(t *testing.T) {
	h, commits := startGroupCommit(t)
	h.answer("nobody", "echo", `{}`)
	waitCounter(h, "switchboard_responses_unknown_total", 1)
	responsesTP := port.TopicPartition{Topic: responses}
	if c, _, _ := h.tx.Counts(); c != 0 || h.src.Stored(responsesTP) != -1 {
		t.Fatalf("%d commits, responses offset %d: a transaction without outputs was committed before commit_interval", c, h.src.Stored(responsesTP))
	}
	commits.Advance(10 * time.Second)
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Stored(responsesTP) == 1 }); err != nil {
		t.Fatalf("the response's offset was not committed at commit_interval: %v", err)
	}
	if got := h.tx.Batches(); len(got) != 1 || got[0] != 0 {
		t.Fatalf("committed transactions held %v outputs, want [0]", got)
	}
}

// A transaction is registered with its coordinator (the owned partitions'
// offsets staged) before its first output, so that the outputs' partitions
// are not refused while the broker completes the previous commit.
func TestGroupCommitRegistersBeforeTheFirstOutput(t *testing.T) {
	h, _ := startGroupCommit(t)
	for i, id := range []string{"r-1", "r-2"} {
		h.request(id, "echo", `{}`)
		h.wait(echoTopic, i+1)
		h.answer(id, "echo", `{}`)
		h.result(i + 1)
	}
	offsets, held := h.tx.Registered()
	if len(offsets) != 2 || held[0] != 0 || held[1] != 0 {
		t.Fatalf("Register calls staged %v holding %v outputs, want two, each before any output", offsets, held)
	}
	// The second transaction, opened by r-2's request, stages the
	// positions at its opening: past r-2's request, and past r-1's answer,
	// which the first committed.
	got := offsets[1]
	if got[port.TopicPartition{Topic: requests}] != 2 || got[port.TopicPartition{Topic: responses}] != 1 {
		t.Fatalf("the second transaction staged %v, want requests 2 and responses 1", got)
	}
}

// waitCounter waits until the metric reaches want, checking every
// millisecond until the harness's deadline.
func waitCounter(h *harness, name string, want float64) {
	h.t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for h.counter(name) < want {
		select {
		case <-tick.C:
		case <-h.ctx.Done():
			h.t.Fatalf("%s stayed at %v, want %v", name, h.counter(name), want)
		}
	}
}
