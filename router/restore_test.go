package router_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/router/routertest"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// stop shuts a harness's router down, as an instance leaving would.
func (h *harness) stop() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.r.Shutdown(ctx); err != nil {
		h.t.Fatal(err)
	}
}

// handOver stops the router once it has handled everything pushed so far
// (settle, then stop), as an instance leaving would. Under at_least_once an
// intent's pending state waits commit_interval before it is written, unless
// it resolves first, and the stop writes the states still waiting: a test
// that hands intents over to another instance waits for its records to be
// handled, not for changelog records that do not exist yet, then checks
// the changelog the stop left.
func (h *harness) handOver() {
	h.t.Helper()
	h.settle()
	h.stop()
}

// resolvedMarker reports whether o is the changelog record of id's resolution.
func (h *harness) resolvedMarker(o port.Output, id string) bool {
	h.t.Helper()
	if string(o.Key) != id || o.Value == nil {
		return false
	}
	var pi schemas.PendingIntent
	if err := h.codec.Decode(o.Value, &pi); err != nil {
		h.t.Fatal(err)
	}
	return pi.ResolvedAt != nil && pi.Outcome != nil
}

// waitState waits until the pending changelog's newest record for each id
// holds a state that ok accepts (nil: any state). Under exactly_once an
// intent's states between two commits collapse into the newest one, so
// tests wait for the state they need, not for a count of records.
func (h *harness) waitState(ok func(*schemas.PendingIntent) bool, ids ...string) {
	h.t.Helper()
	err := h.sink.WaitUntil(h.ctx, pendingT, func(outs []port.Output) bool {
		newest := map[string]port.Output{}
		for _, o := range outs {
			newest[string(o.Key)] = o
		}
		for _, id := range ids {
			o, found := newest[id]
			if !found || o.Value == nil {
				return false
			}
			var pi schemas.PendingIntent
			if err := h.codec.Decode(o.Value, &pi); err != nil || pi.ResolvedAt != nil || ok != nil && !ok(&pi) {
				return false
			}
		}
		return true
	})
	if err != nil {
		h.t.Fatalf("waiting for the pending state of %v: %v", ids, err)
	}
}

// waitMarker waits until the pending changelog's newest record for id is
// its resolution marker.
func (h *harness) waitMarker(id string) {
	h.t.Helper()
	err := h.sink.WaitUntil(h.ctx, pendingT, func(outs []port.Output) bool {
		for i := len(outs) - 1; i >= 0; i-- {
			if string(outs[i].Key) == id {
				return h.resolvedMarker(outs[i], id)
			}
		}
		return false
	})
	if err != nil {
		h.t.Fatalf("waiting for the resolution marker of %s: %v", id, err)
	}
}

func (h *harness) changelog() *routertest.Restorer {
	return &routertest.Restorer{Sink: h.sink, Codec: h.codec, Topic: pendingT, Partitions: 1}
}

func TestTakeOverRestoresPendingIntents(t *testing.T) { both(t, testTakeOverRestoresPendingIntents) }

func testTakeOverRestoresPendingIntents(t *testing.T, delivery string) {
	a := start(t, testConfig, delivery)
	a.request("f-1", "fraud_check", `{"amount":1}`)
	a.request("e-1", "echo", `{"q":1}`)
	a.handOver()
	a.wait(pendingT, 2)

	// Another instance takes the partition over, at the same moment.
	b := start(t, testConfig, delivery, router.WithRestorer(a.changelog()))
	b.settle()
	b.advance(299 * time.Millisecond)
	b.settle()
	if n := b.sink.Count(results); n != 0 {
		t.Fatalf("%d results before the original deadline", n)
	}
	b.advance(2 * time.Millisecond)
	res := b.result(1)
	if res.IntentID != "f-1" || res.Outcome != schemas.OutcomeFallbackStatic {
		t.Fatalf("restored timer: %+v", res)
	}
	if res.Timeline.DispatchedAt == nil || res.Timeline.Deadline != t0.Add(300*time.Millisecond).UnixMilli() {
		t.Fatalf("the restored intent lost its timeline: %+v", res.Timeline)
	}
	b.answer("e-1", "echo", `{"ok":true}`)
	if res := b.result(2); res.IntentID != "e-1" || res.Outcome != schemas.OutcomeAnswered {
		t.Fatalf("restored intent not paired: %+v", res)
	}
	if done := b.wait(pendingT, 2); !b.resolvedMarker(done, "e-1") {
		t.Fatalf("the changelog does not record the restored intent's resolution: %+v", done)
	}
	if got := b.counter("switchboard_intents_restored_total"); got != 2 {
		t.Fatalf("restored metric = %v", got)
	}
}

// TestExpiredWhileUnownedWaitsForTheResponses: intents whose deadline passed
// while no instance owned their partition are answered if their agent
// answered in time, and time out once the responses read show it did not.
func TestExpiredWhileUnownedWaitsForTheResponses(t *testing.T) {
	both(t, func(t *testing.T, delivery string) {
		a := start(t, testConfig, delivery)
		a.request("f-1", "fraud_check", `{}`, func(r *schemas.IntentRequest) { r.ContextRef = schemas.Ptr("u-1") })
		a.request("f-2", "fraud_check", `{}`, func(r *schemas.IntentRequest) { r.ContextRef = schemas.Ptr("u-2") })
		a.handOver()
		a.wait(pendingT, 2)

		// Both deadlines passed while nobody owned the partition; the agent
		// answered f-1 in time, and that answer waits in the responses topic.
		ans := schemas.JSON(`{"decision":"approve"}`)
		v, err := a.codec.Encode(responses, &schemas.AgentResponse{RequestID: "f-1", Agent: "slow", Status: schemas.StatusOK, Answer: &ans})
		if err != nil {
			t.Fatal(err)
		}
		waiting := []*port.Record{{Topic: responses, Key: []byte("f-1"), Value: v, TimestampMs: t0.Add(100 * time.Millisecond).UnixMilli()}}
		b := startWith(t, t0.Add(time.Second), waiting, testConfig, delivery, router.WithRestorer(a.changelog()))
		first, second := b.result(1), b.result(2)
		if first.IntentID != "f-1" || first.Outcome != schemas.OutcomeAnswered {
			t.Fatalf("an answer given in time was not used (or came after the other's timeout): %+v", first)
		}
		if second.IntentID != "f-2" || second.Outcome != schemas.OutcomeFallbackStatic {
			t.Fatalf("unanswered intent: %+v", second)
		}
		var to schemas.IntentTimeout
		if err := b.codec.Decode(b.wait(timeoutsT, 1).Value, &to); err != nil || to.IntentID != "f-2" {
			t.Fatalf("timeout event %+v %v", to, err)
		}
		b.settle()
		if n := b.sink.Count(timeoutsT); n != 1 {
			t.Fatalf("%d timeout events", n)
		}
	})
}

// TestTimeoutsWaitForALaggingResponsesPartition: at its deadline an intent
// whose responses partition has not been read up to the deadline (here: just
// taken over, its backlog not read yet) waits for it, so an answer the agent
// gave in time is used.
func TestTimeoutsWaitForALaggingResponsesPartition(t *testing.T) {
	both(t, func(t *testing.T, delivery string) {
		a := start(t, testConfig, delivery)
		a.request("l-1", "fraud_check", `{}`)
		a.handOver()
		a.wait(pendingT, 1)

		ans := schemas.JSON(`{"decision":"approve"}`)
		v, err := a.codec.Encode(responses, &schemas.AgentResponse{RequestID: "l-1", Agent: "slow", Status: schemas.StatusOK, Answer: &ans})
		if err != nil {
			t.Fatal(err)
		}
		waiting := []*port.Record{{Topic: responses, Key: []byte("l-1"), Value: v, TimestampMs: t0.Add(200 * time.Millisecond).UnixMilli()}}
		respTP := port.TopicPartition{Topic: responses}
		b := startWithStalled(t, respTP, waiting, router.WithRestorer(a.changelog()), delivery)
		b.settle()             // the restore is done: l-1 is pending, on time
		b.advance(time.Second) // l-1's deadline passes, its answer still unread
		b.settle()
		if n := b.sink.Count(results); n != 0 {
			t.Fatalf("timed out before the responses were read up to the deadline (%d results)", n)
		}
		b.src.Unstall(respTP)
		if res := b.result(1); res.Outcome != schemas.OutcomeAnswered {
			t.Fatalf("an answer given in time lost to a lagging read: %+v", res)
		}
		b.settle()
		if n := b.sink.Count(timeoutsT); n != 0 {
			t.Fatalf("%d timeout events for an intent answered in time", n)
		}
	})
}

// startWithStalled starts a router at t0 whose partition tp is stalled
// (assigned, with records waiting, but not read yet).
func startWithStalled(t *testing.T, tp port.TopicPartition, waiting []*port.Record, restorer router.Option, delivery string) *harness {
	t.Helper()
	return startWithHook(t, t0, waiting, func(s *routertest.Source) { s.Stall(tp) }, testConfig, delivery, restorer)
}

func TestAbortedTransactionIsRedone(t *testing.T) {
	h := start(t, testConfig, config.ExactlyOnce)
	h.tx.FailCommits(&port.TxnError{Err: errors.New("coordinator moved"), Abortable: true})
	h.request("x-1", "echo", `{}`)
	// The router aborts and rewinds to the committed offsets; Kafka then
	// delivers the request again, which this test plays by pushing it again.
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Seeks() > 0 }); err != nil {
		t.Fatal("no rewind after an aborted transaction")
	}
	h.offset[requests] = 0
	h.request("x-1", "echo", `{}`)
	h.wait(pendingT, 1)
	h.settle()
	// The dispatch went out at once, before the abort, and again with the
	// redo: the agent sees a duplicate. Its pending state was committed
	// once, by the redo.
	if n, pend := h.sink.Count(echoTopic), h.sink.Count(pendingT); n != 2 || pend != 1 {
		t.Fatalf("%d dispatches and %d pending records visible after an abort and a redo, want 2 and 1", n, pend)
	}
	if _, aborts, _ := h.tx.Counts(); aborts != 1 {
		t.Fatalf("aborts = %d", aborts)
	}
	h.answer("x-1", "echo", `{}`)
	if res := h.result(1); res.Outcome != schemas.OutcomeAnswered {
		t.Fatalf("result %+v", res)
	}
	if got := h.counter("switchboard_transactions_total", "result", "aborted"); got != 1 {
		t.Fatalf("aborted transactions metric = %v", got)
	}
}

// TestSendFailingMidEventLeavesNoGhostState: a send that fails partway
// through an event (here the timeout event of an intent expired on arrival,
// before its result) drops the whole event's work, the rest of it included:
// no transaction opened after the failure is committed, and the intent is not
// remembered as resolved, so the redo gives it its timeout event and result.
func TestSendFailingMidEventLeavesNoGhostState(t *testing.T) {
	h := start(t, testConfig, config.ExactlyOnce)
	h.tx.FailProduce(timeoutsT, &port.TxnError{Err: errors.New("send failed"), Abortable: true})
	expired := &schemas.IntentRequest{IntentID: "g-1", IntentType: "echo", Payload: schemas.JSON(`{}`)}
	h.push(requests, "g-1", expired, t0.Add(-time.Minute))
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Seeks() > 0 }); err != nil {
		t.Fatal("no rewind after a failed send")
	}
	h.offset[requests] = 0
	h.push(requests, "g-1", expired, t0.Add(-time.Minute))
	if to := h.timeoutEvent(1); to.IntentID != "g-1" || to.Reason != schemas.ReasonExpiredOnArrival {
		t.Fatalf("timeout event %+v", to)
	}
	h.settle()
	if n := h.sink.Count(results); n != 1 {
		t.Fatalf("%d results", n)
	}
	if res := h.result(1); res.IntentID != "g-1" || res.Outcome != schemas.OutcomeTimedOut {
		t.Fatalf("result %+v", res)
	}
}

func TestFatalTransactionErrorReplacesTheProducer(t *testing.T) {
	h := start(t, testConfig, config.ExactlyOnce)
	h.tx.FailCommits(&port.TxnError{Err: errors.New("fenced"), Fatal: true})
	h.request("z-1", "echo", `{}`)
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Seeks() > 0 }); err != nil {
		t.Fatal("no rewind after a fatal transaction error")
	}
	if _, _, resets := h.tx.Counts(); resets != 1 {
		t.Fatalf("resets = %d", resets)
	}
}

func TestMisroutedRecordsAreMoved(t *testing.T) {
	both(t, func(t *testing.T, delivery string) {
		h := start(t, strings.Replace(testConfig, "partitions: 1", "partitions: 4", 1), delivery)
		// A key whose murmur2 partition among 4 is not 0.
		key := ""
		for i := 0; key == ""; i++ {
			if k := "m-" + string(rune('a'+i)); router.PartitionFor([]byte(k), 4) != 0 {
				key = k
			}
		}
		h.request(key, "echo", `{}`) // pushed to partition 0, as kcat's default partitioner might
		moved := h.wait(requests, 1)
		if moved.Partition == nil || *moved.Partition != router.PartitionFor([]byte(key), 4) || !hasHeader(moved, port.HeaderMovedFrom, "0") {
			t.Fatalf("moved record %+v", moved)
		}
		h.settle()
		if n := h.sink.Count(echoTopic); n != 0 {
			t.Fatal("a misrouted request was dispatched by an instance that does not own it")
		}
		if got := h.counter("switchboard_records_moved_total"); got != 1 {
			t.Fatalf("moved metric = %v", got)
		}
	})
}

func TestFallbackFeedWarmsTheCache(t *testing.T) {
	feed := func(ctx context.Context, apply func(*schemas.FallbackAnswer)) error {
		apply(&schemas.FallbackAnswer{IntentType: "fraud_check", CacheKey: "user-9", Answer: `{"warm":true}`, AnsweredAt: t0.UnixMilli()})
		<-ctx.Done()
		return nil
	}
	h := start(t, testConfig, config.ExactlyOnce, router.WithFallbackFeed(feed))
	for i := 0; h.counter("switchboard_fallback_cache_entries") != 1; i++ {
		if i == 1000 {
			t.Fatal("the fed answer never reached the cache")
		}
		h.advance(time.Millisecond) // a tick refreshes the gauge
		h.settle()
	}
	h.request("w-1", "fraud_check", `{}`, func(r *schemas.IntentRequest) { r.ContextRef = schemas.Ptr("user-9") })
	h.wait(slowTopic, 1)
	h.advance(400 * time.Millisecond)
	if res := h.result(1); res.Outcome != schemas.OutcomeFallbackCache || string(*res.Answer) != `{"warm":true}` {
		t.Fatalf("result %+v", res)
	}
}

func TestAnswersAreSharedThroughTheFallbackTopic(t *testing.T) {
	h := start(t, testConfig, config.ExactlyOnce)
	h.request("s-1", "fraud_check", `{}`, func(r *schemas.IntentRequest) { r.ContextRef = schemas.Ptr("user-3") })
	h.wait(slowTopic, 1)
	h.answer("s-1", "slow", `{"decision":"approve"}`)
	out := h.wait(config.DefaultFallback, 1)
	var fa schemas.FallbackAnswer
	if err := h.codec.Decode(out.Value, &fa); err != nil {
		t.Fatal(err)
	}
	if string(out.Key) != "fraud_check/user-3" || string(fa.Answer) != `{"decision":"approve"}` {
		t.Fatalf("fallback record %s %+v", out.Key, fa)
	}
}

// TestDuplicateAfterTakeoverIsNotDispatchedAgain: the changelog remembers a
// resolution for the dedup window, so an instance that takes a partition over
// drops a duplicate request it never saw resolve, and tombstones the record
// once the window has passed.
func TestDuplicateAfterTakeoverIsNotDispatchedAgain(t *testing.T) {
	both(t, func(t *testing.T, delivery string) {
		a := start(t, testConfig, delivery)
		a.request("d-1", "echo", `{}`)
		a.wait(echoTopic, 1)
		a.answer("d-1", "echo", `{}`)
		a.result(1)
		a.waitMarker("d-1")
		a.stop()

		b := start(t, testConfig, delivery, router.WithRestorer(a.changelog()))
		b.request("d-1", "echo", `{}`) // a client sends it again
		b.settle()
		if n := b.sink.Count(echoTopic); n != 0 {
			t.Fatalf("a resolved intent was dispatched again after a takeover (%d)", n)
		}
		if n := b.sink.Count(results); n != 0 {
			t.Fatalf("a resolved intent got a second result after a takeover (%d)", n)
		}
		if got := b.counter("switchboard_intents_duplicate_total"); got != 1 {
			t.Fatalf("duplicates = %v", got)
		}
		// After the dedup window (10m, and at most one generation more) the
		// record is tombstoned; not before.
		b.advance(9 * time.Minute)
		b.settle()
		if n := b.sink.Count(pendingT); n != 0 {
			t.Fatalf("tombstoned within the dedup window (%d)", n)
		}
		b.advance(3 * time.Minute)
		tomb := b.wait(pendingT, 1)
		if string(tomb.Key) != "d-1" || tomb.Value != nil {
			t.Fatalf("no tombstone after the dedup window: %+v", tomb)
		}
	})
}

// TestLostAssignmentIsNeverCommitted: once the group has moved on without
// this instance (its session timed out, or it was fenced), what it did since
// is aborted, never committed: another instance redoes it.
func TestLostAssignmentIsNeverCommitted(t *testing.T) {
	h := start(t, testConfig, config.ExactlyOnce)
	h.settle()
	h.src.LoseAssignment()
	h.request("lost-1", "echo", `{}`)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, aborts, _ := h.tx.Counts(); aborts > 0 {
			break
		}
		select {
		case <-tick.C:
		case <-h.ctx.Done():
			t.Fatal("nothing was aborted after the assignment was lost")
		}
	}
	h.src.Push(port.Revoked{{Topic: requests}, {Topic: responses}})
	h.src.Push(port.Assigned{{Topic: requests}, {Topic: responses}})
	h.settle()
	// Its dispatch went out at once (a zombie's duplicate, harmless); its
	// pending state was never committed.
	if n := h.sink.Count(pendingT); n != 0 {
		t.Fatalf("the pending state of an intent taken after the assignment was lost was committed (%d)", n)
	}
	if got := h.counter("switchboard_transactions_total", "result", "aborted"); got < 1 {
		t.Fatalf("aborted transactions = %v", got)
	}
}

// A consumer that cannot read its committed offsets (librdkafka stuck after a
// broker restart) makes the takeover give up with a FatalError after a while,
// so that 'serve' replaces it, rather than holding its partitions with no
// progress for ever.
func TestTakeOverThatKeepsFailingIsFatal(t *testing.T) {
	clock, _, done := runFailingTakeOver(t)
	err := driveUntilRunReturns(t, clock, done, nil)
	var fatal *port.FatalError
	if !errors.As(err, &fatal) || !strings.Contains(err.Error(), "taking over partitions failed") {
		t.Fatalf("Run returned %v, want a FatalError from the takeover", err)
	}
	if clock.Since(t0) < 20*time.Second {
		t.Fatalf("gave up after %v: a brief outage must be retried", clock.Since(t0))
	}
}

// A consumer whose group took its partitions away while its takeover was
// failing (the session ended during the outage) gives up at once: there is
// nothing left to wait for.
func TestTakeOverGivesUpWhenTheAssignmentIsLost(t *testing.T) {
	clock, src, done := runFailingTakeOver(t)
	err := driveUntilRunReturns(t, clock, done, func() {
		if clock.Since(t0) >= 5*time.Second {
			src.LoseAssignment()
		}
	})
	var fatal *port.FatalError
	if !errors.As(err, &fatal) || !strings.Contains(err.Error(), "lost them") {
		t.Fatalf("Run returned %v, want a FatalError naming the lost assignment", err)
	}
	if clock.Since(t0) >= 20*time.Second {
		t.Fatalf("gave up only after %v, although the assignment was lost at 5s", clock.Since(t0))
	}
}

// runFailingTakeOver runs an at_least_once router whose source cannot read its
// committed offsets, assigned both partitions.
func runFailingTakeOver(t *testing.T) (*clockwork.FakeClock, *routertest.Source, <-chan error) {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(testConfig), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Router.Delivery = config.AtLeastOnce
	codec, err := schemas.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	clock := clockwork.NewFakeClockAt(t0)
	src := routertest.NewSource()
	src.FailCommitted(errors.New("Local: Timed out"))
	r, err := router.New(cfg, codec, src, routertest.NewSink(), router.WithClock(clock),
		router.WithRegisterer(prometheus.NewRegistry()), router.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	src.Push(port.Assigned{{Topic: requests}, {Topic: responses}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return clock, src, done
}

// driveUntilRunReturns moves the fake clock on whenever the takeover waits on
// its backoff (the event loop's ticker and the backoff's timer: two waiters),
// calling each, if not nil, before every step, and returns what Run returned.
func driveUntilRunReturns(t *testing.T, clock *clockwork.FakeClock, done <-chan error, each func()) error {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		waiting := make(chan error, 1)
		bctx, stop := context.WithCancel(context.Background())
		go func() { waiting <- clock.BlockUntilContext(bctx, 2) }()
		select {
		case err := <-done:
			stop()
			return err
		case <-deadline.C:
			stop()
			t.Fatal("the takeover neither succeeded nor gave up")
		case err := <-waiting:
			stop()
			if err != nil {
				t.Fatalf("waiting for the takeover's backoff: %v", err)
			}
			if each != nil {
				each()
			}
			clock.Advance(5 * time.Second)
		}
	}
}

// A takeover retries a brief outage (committed offsets timing out for 15 s)
// and then serves the partitions, without replacing the consumer.
func TestTakeOverRidesOutABriefOutage(t *testing.T) {
	both(t, testTakeOverRidesOutABriefOutage)
}

func testTakeOverRidesOutABriefOutage(t *testing.T, delivery string) {
	h := startWithHook(t, t0, nil, func(s *routertest.Source) { s.FailCommitted(errors.New("Local: Timed out")) }, testConfig, delivery)
	for {
		// Parked on its backoff timer (beside the event loop's ticker).
		if err := h.clock.BlockUntilContext(h.ctx, 2); err != nil {
			t.Fatalf("the takeover stopped retrying at %v: %v", h.clock.Since(t0), err)
		}
		if h.clock.Since(t0) >= 15*time.Second {
			break
		}
		h.clock.Advance(5 * time.Second)
	}
	h.src.FailCommitted(nil)
	h.clock.Advance(5 * time.Second)
	h.request("after-1", "echo", `{}`)
	h.wait(echoTopic, 1)
}
