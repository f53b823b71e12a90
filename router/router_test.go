package router_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/router/routertest"
	"github.com/switchboard-mcp/switchboard/schemas"
)

const testConfig = `
agents:
  echo: {}
  slow: {}
intents:
  echo:        {agent: echo, timeout: 2s}
  fraud_check: {agent: slow, timeout: 300ms, fallback: {cache: {max_age: 10m}, static: {decision: review}}}
  plain:       {agent: slow, timeout: 1s, min_timeout: 100ms, max_timeout: 5s}
topics:
  partitions: 1
router:
  max_pending: 3
  commit_interval: 2ms
`

var deliveries = []string{config.ExactlyOnce, config.AtLeastOnce}

// both runs a test once per delivery guarantee.
func both(t *testing.T, f func(t *testing.T, delivery string)) {
	for _, d := range deliveries {
		t.Run(d, func(t *testing.T) { f(t, d) })
	}
}

const (
	requests  = config.DefaultRequests
	responses = config.DefaultResponses
	results   = config.DefaultResults
	timeoutsT = config.DefaultTimeouts
	dlq       = config.DefaultDeadLetter
	pendingT  = config.DefaultPending
	echoTopic = "mcp.agent.echo.request"
	slowTopic = "mcp.agent.slow.request"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

type harness struct {
	t      testing.TB
	ctx    context.Context
	clock  *clockwork.FakeClock
	src    *routertest.Source
	sink   *routertest.Sink   // what is visible: committed (exactly_once) or produced
	tx     *routertest.TxSink // exactly_once only
	codec  *schemas.Codec
	reg    *prometheus.Registry
	r      *router.Router
	offset map[string]int64
	marks  int // settleMarked's markers so far
}

func start(t testing.TB, yaml, delivery string, opts ...router.Option) *harness {
	t.Helper()
	return startAt(t, t0, yaml, delivery, opts...)
}

// startAt starts a router whose fake clock reads at.
func startAt(t testing.TB, at time.Time, yaml, delivery string, opts ...router.Option) *harness {
	t.Helper()
	return startWith(t, at, nil, yaml, delivery, opts...)
}

// startWith starts a router whose fake clock reads at, with records already
// waiting in its partitions when they are assigned.
func startWith(t testing.TB, at time.Time, waiting []*port.Record, yaml, delivery string, opts ...router.Option) *harness {
	t.Helper()
	return startWithHook(t, at, waiting, nil, yaml, delivery, opts...)
}

// startWithHook is startWith with a hook that prepares the source first.
func startWithHook(t testing.TB, at time.Time, waiting []*port.Record, prepare func(*routertest.Source), yaml, delivery string, opts ...router.Option) *harness {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Router.Delivery = delivery
	codec, err := schemas.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	h := &harness{t: t, ctx: ctx, clock: clockwork.NewFakeClockAt(at), src: routertest.NewSource(), codec: codec, reg: prometheus.NewRegistry(), offset: map[string]int64{}}
	var sink port.Sink
	if delivery == config.ExactlyOnce {
		h.tx = routertest.NewTxSink(h.src)
		h.sink, sink = h.tx.Sink, h.tx
	} else {
		h.sink = routertest.NewSink()
		sink = h.sink
	}
	opts = append([]router.Option{
		router.WithClock(h.clock), router.WithCommitClock(clockwork.NewRealClock()), router.WithRegisterer(h.reg),
		router.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	}, opts...)
	h.r, err = router.New(cfg, codec, h.src, sink, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(h.src)
	}
	evs := []any{port.Assigned{{Topic: requests}, {Topic: responses}}}
	for _, r := range waiting {
		evs = append(evs, r)
		h.offset[r.Topic]++
	}
	h.src.Push(evs...)
	done := make(chan error, 1)
	go func() { done <- h.r.Run(ctx) }()
	// The event loop's one ticker is the only fake-clock waiter.
	if err := h.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	})
	return h
}

// push hands the router one record at the next offset of its topic, stamped
// with the fake clock's now unless ts says otherwise.
func (h *harness) push(topic string, key string, rec schemas.Record, ts ...time.Time) int64 {
	h.t.Helper()
	b, err := h.codec.Encode(topic, rec)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.pushRaw(topic, key, b, ts...)
}

func (h *harness) pushRaw(topic, key string, value []byte, ts ...time.Time) int64 {
	stamp := h.clock.Now()
	if len(ts) > 0 {
		stamp = ts[0]
	}
	off := h.offset[topic]
	h.offset[topic]++
	h.src.Push(&port.Record{Topic: topic, Partition: 0, Offset: off, Key: []byte(key), Value: value, TimestampMs: stamp.UnixMilli()})
	return off
}

func (h *harness) request(id, typ, payload string, edit ...func(*schemas.IntentRequest)) int64 {
	req := &schemas.IntentRequest{IntentID: id, IntentType: typ, Payload: schemas.JSON(payload)}
	for _, e := range edit {
		e(req)
	}
	return h.push(requests, id, req)
}

func (h *harness) answer(id, agent, answer string) int64 {
	a := schemas.JSON(answer)
	return h.push(responses, id, &schemas.AgentResponse{RequestID: id, Agent: agent, Status: schemas.StatusOK, Answer: &a})
}

// wait returns the n-th output (1-based) of topic, waiting for it.
func (h *harness) wait(topic string, n int) port.Output {
	h.t.Helper()
	outs, err := h.sink.WaitFor(h.ctx, topic, n)
	if err != nil {
		h.t.Fatalf("waiting for output %d on %s: %v (have %d)", n, topic, err, len(outs))
	}
	return outs[n-1]
}

func (h *harness) result(n int) *schemas.IntentResult {
	h.t.Helper()
	var res schemas.IntentResult
	if err := h.codec.Decode(h.wait(results, n).Value, &res); err != nil {
		h.t.Fatal(err)
	}
	return &res
}

func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	h.clock.Advance(d)
}

// settle waits until the router has handled everything pushed so far: it
// pushes a marker intent of an unknown type and waits for its rejection.
func (h *harness) settle() {
	h.t.Helper()
	n := h.sink.Count(dlq)
	h.pushRaw(requests, "", []byte("marker"))
	h.wait(dlq, n+1)
}

// settleRevoked is settle once partition 0 is revoked: its marker is
// skipped, not dead-lettered, and everything pushed before it was handled.
func (h *harness) settleRevoked() {
	h.t.Helper()
	const skipped = "switchboard_records_skipped_revoked_total"
	n := h.counter(skipped)
	h.pushRaw(requests, "", []byte("marker"))
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for h.counter(skipped) <= n {
		select {
		case <-tick.C:
		case <-h.ctx.Done():
			h.t.Fatal("the marker pushed after the revoke was never skipped")
		}
	}
}

func (h *harness) counter(name string, labels ...string) float64 {
	h.t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue metrics
				}
			}
			if c := m.GetCounter(); c != nil {
				total += c.GetValue()
			} else if g := m.GetGauge(); g != nil {
				total += g.GetValue()
			} else if hg := m.GetHistogram(); hg != nil {
				total += float64(hg.GetSampleCount()) // a histogram counts its observations
			}
		}
	}
	return total
}

// The router times its own share of each record's latency, from the poll
// to the outputs handed to the producer, by topic.
func TestRecordLatencyIsObservedPerTopic(t *testing.T) {
	h := start(t, testConfig, config.AtLeastOnce)
	h.request("l-1", "echo", `{}`)
	h.wait(echoTopic, 1)
	h.answer("l-1", "echo", `{}`)
	h.result(1)
	h.settle() // one more request record: the marker
	// The marker's own observation is made once its outputs are handed to
	// the sink, so just after settle sees them: wait for it.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for h.counter("switchboard_router_record_seconds", "topic", "requests") < 2 {
		select {
		case <-tick.C:
		case <-h.ctx.Done():
			t.Fatalf("request observations = %v, want 2", h.counter("switchboard_router_record_seconds", "topic", "requests"))
		}
	}
	if got := h.counter("switchboard_router_record_seconds", "topic", "requests"); got != 2 {
		t.Fatalf("request observations = %v, want 2", got)
	}
	if got := h.counter("switchboard_router_record_seconds", "topic", "responses"); got != 1 {
		t.Fatalf("response observations = %v, want 1", got)
	}
}

// A record held in the router for seconds (here: its dispatch's produce
// waits 3 s) is observed as seconds, in a bucket of its own, not lumped
// into the top one: a collapsed router's p99 must read what it was, not
// the histogram's ceiling (it read 163.84 ms in every collapsed bench run).
func TestRecordLatencyBucketsReachSeconds(t *testing.T) {
	h := start(t, testConfig, config.AtLeastOnce)
	waiting := h.sink.Block()
	t.Cleanup(h.sink.Unblock)
	h.request("slow", "echo", `{}`)
	<-waiting
	h.advance(3 * time.Second)
	h.sink.Unblock()
	h.wait(echoTopic, 1)
	// Only requests were read: the metric's only observations are theirs.
	h.waitCounter("switchboard_router_record_seconds", func(v float64) bool { return v >= 1 }, "the held record was never observed")
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "switchboard_router_record_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() != "requests" {
				continue
			}
			below := uint64(0)
			for _, b := range m.GetHistogram().GetBucket() {
				if b.GetCumulativeCount() > below {
					if ub := b.GetUpperBound(); ub < 3 || ub > 10 {
						t.Fatalf("a 3 s record landed in the bucket up to %v s, want one between 3 and 10 s", ub)
					}
					return
				}
				below = b.GetCumulativeCount()
			}
			t.Fatalf("a 3 s record is past every bucket (the last is %v s)", m.GetHistogram().GetBucket()[len(m.GetHistogram().GetBucket())-1].GetUpperBound())
		}
	}
	t.Fatal("no requests series of switchboard_router_record_seconds")
}

func TestAnsweredRoundTrip(t *testing.T) { both(t, testAnsweredRoundTrip) }

func testAnsweredRoundTrip(t *testing.T, delivery string) {
	h := start(t, testConfig, delivery)
	h.request("i-1", "echo", `{"q":1}`, func(r *schemas.IntentRequest) { r.SessionID = schemas.Ptr("s-1") })

	var ar schemas.AgentRequest
	if err := h.codec.Decode(h.wait(echoTopic, 1).Value, &ar); err != nil {
		t.Fatal(err)
	}
	if ar.IntentID != "i-1" || ar.Agent != "echo" || ar.Attempt != 1 || string(ar.Payload) != `{"q":1}` {
		t.Fatalf("dispatched %+v", ar)
	}
	if want := t0.Add(2 * time.Second).UnixMilli(); ar.Deadline != want {
		t.Fatalf("deadline = %d, want record timestamp + 2s = %d", ar.Deadline, want)
	}
	if k := string(h.wait(echoTopic, 1).Key); k != "i-1" {
		t.Fatalf("dispatch key = %q", k)
	}

	h.answer("i-1", "echo", `{"echo":{"q":1}}`)
	res := h.result(1)
	if res.Outcome != schemas.OutcomeAnswered || res.Answer == nil || string(*res.Answer) != `{"echo":{"q":1}}` {
		t.Fatalf("result %+v", res)
	}
	if res.SessionID == nil || *res.SessionID != "s-1" || res.Attempts != 1 || res.Agent != "echo" {
		t.Fatalf("result fields %+v", res)
	}
	if res.Timeline.DispatchedAt == nil || res.Timeline.AnsweredAt == nil || res.Timeline.Deadline != ar.Deadline {
		t.Fatalf("timeline %+v", res.Timeline)
	}
	if h.sink.Count(timeoutsT) != 0 {
		t.Fatal("an answered intent published a timeout event")
	}
	// Both records are done once the result is acknowledged.
	err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool {
		return s.Stored(port.TopicPartition{Topic: requests}) == 1 && s.Stored(port.TopicPartition{Topic: responses}) == 1
	})
	if err != nil {
		t.Fatalf("offsets not stored: requests=%d responses=%d", h.src.Stored(port.TopicPartition{Topic: requests}), h.src.Stored(port.TopicPartition{Topic: responses}))
	}
	if got := h.counter("switchboard_intents_resolved_total", "intent_type", "echo", "outcome", "answered"); got != 1 {
		t.Fatalf("resolved metric = %v", got)
	}
}

func TestTimeoutFallsBackToStaticThenToTheLateAnswer(t *testing.T) {
	both(t, testTimeoutFallsBackToStaticThenToTheLateAnswer)
}

func testTimeoutFallsBackToStaticThenToTheLateAnswer(t *testing.T, delivery string) {
	h := start(t, testConfig, delivery)
	ref := func(r *schemas.IntentRequest) { r.ContextRef = schemas.Ptr("user-1") }
	h.request("f-1", "fraud_check", `{"amount":1}`, ref)
	h.wait(slowTopic, 1)

	h.advance(299 * time.Millisecond)
	h.settle()
	if h.sink.Count(results) != 0 {
		t.Fatal("resolved before the deadline")
	}
	h.advance(10 * time.Millisecond)
	var to schemas.IntentTimeout
	if err := h.codec.Decode(h.wait(timeoutsT, 1).Value, &to); err != nil {
		t.Fatal(err)
	}
	if to.IntentID != "f-1" || to.Reason != schemas.ReasonDeadline || to.Fallback != schemas.FallbackStatic || to.Agent != "slow" {
		t.Fatalf("timeout event %+v", to)
	}
	res := h.result(1)
	if res.Outcome != schemas.OutcomeFallbackStatic || res.Answer == nil || string(*res.Answer) != `{"decision":"review"}` {
		t.Fatalf("result %+v", res)
	}

	// The slow agent answers after the deadline: no second result, but the
	// answer refreshes the fallback cache.
	h.answer("f-1", "slow", `{"decision":"approve","score":0.1}`)
	h.settle()
	if n := h.sink.Count(results); n != 1 {
		t.Fatalf("%d results for one intent", n)
	}
	if got := h.counter("switchboard_responses_late_total"); got != 1 {
		t.Fatalf("late responses = %v", got)
	}

	h.request("f-2", "fraud_check", `{"amount":2}`, ref)
	h.wait(slowTopic, 2)
	h.advance(400 * time.Millisecond)
	res = h.result(2)
	if res.IntentID != "f-2" || res.Outcome != schemas.OutcomeFallbackCache || string(*res.Answer) != `{"decision":"approve","score":0.1}` {
		t.Fatalf("second result %+v", res)
	}
	if to := h.wait(timeoutsT, 2); !strings.Contains(string(to.Value), `"fallback":"cache"`) {
		t.Fatalf("second timeout event %s", to.Value)
	}

	// Another entity has no cached answer: static again.
	h.request("f-3", "fraud_check", `{}`, func(r *schemas.IntentRequest) { r.ContextRef = schemas.Ptr("user-2") })
	h.wait(slowTopic, 3)
	h.advance(400 * time.Millisecond)
	if res := h.result(3); res.Outcome != schemas.OutcomeFallbackStatic {
		t.Fatalf("other entity: %+v", res)
	}
}

func TestTimeoutWithoutFallbackIsTimedOut(t *testing.T) {
	both(t, testTimeoutWithoutFallbackIsTimedOut)
}

func testTimeoutWithoutFallbackIsTimedOut(t *testing.T, delivery string) {
	h := start(t, testConfig, delivery)
	h.request("p-1", "plain", `{}`, func(r *schemas.IntentRequest) { r.TimeoutMs = schemas.Ptr(int64(10)) }) // clamped to 100ms
	h.wait(slowTopic, 1)
	h.advance(99 * time.Millisecond)
	h.settle()
	if h.sink.Count(results) != 0 {
		t.Fatal("min_timeout not applied")
	}
	h.advance(2 * time.Millisecond)
	if res := h.result(1); res.Outcome != schemas.OutcomeTimedOut || res.Answer != nil {
		t.Fatalf("result %+v", res)
	}
}

func TestExpiredOnArrivalIsNeverDispatched(t *testing.T) {
	both(t, testExpiredOnArrivalIsNeverDispatched)
}

func testExpiredOnArrivalIsNeverDispatched(t *testing.T, delivery string) {
	h := start(t, testConfig, delivery)
	old := t0.Add(-5 * time.Second)
	h.push(requests, "e-1", &schemas.IntentRequest{IntentID: "e-1", IntentType: "fraud_check", Payload: "{}"}, old)
	var to schemas.IntentTimeout
	if err := h.codec.Decode(h.wait(timeoutsT, 1).Value, &to); err != nil {
		t.Fatal(err)
	}
	if to.Reason != schemas.ReasonExpiredOnArrival || to.Deadline != old.Add(300*time.Millisecond).UnixMilli() {
		t.Fatalf("timeout %+v", to)
	}
	if res := h.result(1); res.Outcome != schemas.OutcomeFallbackStatic || res.Timeline.DispatchedAt != nil {
		t.Fatalf("result %+v", res)
	}
	h.settle()
	if h.sink.Count(slowTopic) != 0 {
		t.Fatal("an expired intent was dispatched")
	}
}

func TestDuplicatesNeverDispatchOrResolveTwice(t *testing.T) {
	both(t, testDuplicatesNeverDispatchOrResolveTwice)
}

func testDuplicatesNeverDispatchOrResolveTwice(t *testing.T, delivery string) {
	h := start(t, testConfig, delivery)
	h.request("d-1", "echo", `{}`)
	h.request("d-1", "echo", `{}`) // while pending
	h.wait(echoTopic, 1)
	h.answer("d-1", "echo", `1`)
	h.result(1)
	h.answer("d-1", "echo", `2`)   // duplicate response
	h.request("d-1", "echo", `{}`) // after resolution
	h.settle()
	if n := h.sink.Count(echoTopic); n != 1 {
		t.Fatalf("dispatched %d times", n)
	}
	if n := h.sink.Count(results); n != 1 {
		t.Fatalf("%d results", n)
	}
	if got := h.counter("switchboard_intents_duplicate_total"); got != 2 {
		t.Fatalf("duplicate intents = %v", got)
	}
	if got := h.counter("switchboard_responses_duplicate_total"); got != 1 {
		t.Fatalf("duplicate responses = %v", got)
	}
}

func TestMalformedAndUnroutableRecordsAreDeadLettered(t *testing.T) {
	both(t, testMalformedAndUnroutableRecordsAreDeadLettered)
}

func testMalformedAndUnroutableRecordsAreDeadLettered(t *testing.T, delivery string) {
	h := start(t, testConfig, delivery)
	off := h.pushRaw(requests, "m-1", []byte(`{"intent_id":"m-1","intent_type":`))
	dl := h.wait(dlq, 1)
	hdr := map[string]string{}
	for _, x := range dl.Headers {
		hdr[x.Key] = string(x.Value)
	}
	if hdr[port.HeaderOriginalTopic] != requests || hdr[port.HeaderOriginalOffset] != strconv.FormatInt(off, 10) ||
		hdr[port.HeaderOriginalPartition] != "0" || hdr[port.HeaderErrorClass] == "" || hdr[port.HeaderErrorMessage] == "" {
		t.Fatalf("dead-letter headers %v", hdr)
	}
	if string(dl.Value) != `{"intent_id":"m-1","intent_type":` || string(dl.Key) != "m-1" {
		t.Fatalf("dead letter is not the original record: %q", dl.Value)
	}
	// The id was readable from the key: the caller hears why.
	res := h.result(1)
	if res.IntentID != "m-1" || res.Outcome != schemas.OutcomeRejected || res.Error == nil || res.Error.Code != hdr[port.HeaderErrorClass] {
		t.Fatalf("rejection %+v", res)
	}

	h.request("u-1", "teleport", `{}`)
	dl = h.wait(dlq, 2)
	if !hasHeader(dl, port.HeaderErrorClass, router.ClassUnroutable) {
		t.Fatalf("unroutable class missing: %v", dl.Headers)
	}
	if res := h.result(2); res.IntentID != "u-1" || res.Outcome != schemas.OutcomeRejected || !strings.Contains(res.Error.Message, "teleport") {
		t.Fatalf("unroutable result %+v", res)
	}

	h.request("v-1", "echo", `{}`, func(r *schemas.IntentRequest) { r.TimeoutMs = schemas.Ptr(int64(-5)) })
	if dl := h.wait(dlq, 3); !hasHeader(dl, port.HeaderErrorClass, router.ClassInvalidIntent) {
		t.Fatalf("invalid intent class missing: %v", dl.Headers)
	}
	if res := h.result(3); !strings.Contains(res.Error.Message, "timeout_ms") {
		t.Fatalf("validation error does not name the field: %+v", res.Error)
	}

	h.pushRaw(responses, "x", []byte("\x00\x00\x00\x00\x07garbage"))
	if dl := h.wait(dlq, 4); !hasHeader(dl, port.HeaderOriginalTopic, responses) {
		t.Fatalf("bad response not dead-lettered: %v", dl.Headers)
	}

	// And the router keeps routing.
	h.request("ok-1", "echo", `{}`)
	h.wait(echoTopic, 1)
	if err := h.r.Ready(); err != nil {
		t.Fatalf("not ready after bad input: %v", err)
	}
	// The bad records' offsets advance.
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Stored(port.TopicPartition{Topic: responses}) == 1 }); err != nil {
		t.Fatal("dead-lettered response offset not stored")
	}
}

// TestOffsetsWaitForAcknowledgement: at_least_once stores a request's
// offset once its dispatch and its pending-state record are acknowledged (the
// changelog then holds the intent; the state is written commit_interval
// after the dispatch), and a response's once its result and resolution
// marker are.
func TestOffsetsWaitForAcknowledgement(t *testing.T) {
	h := start(t, testConfig, config.AtLeastOnce)
	reqTP, respTP := port.TopicPartition{Topic: requests}, port.TopicPartition{Topic: responses}
	h.sink.Hold()
	h.request("o-1", "echo", `{}`)
	h.wait(echoTopic, 1)
	h.advance(5 * time.Millisecond) // commit_interval 2ms: the state is due, and waits for the dispatch's acknowledgement
	h.settle()
	if got := h.src.Stored(reqTP); got != -1 {
		t.Fatalf("stored %d before the dispatch was acknowledged", got)
	}
	h.sink.Release()
	h.wait(pendingT, 1)
	want := h.offset[requests]
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Stored(reqTP) == want }); err != nil {
		t.Fatalf("stored %d after acknowledgement, want %d", h.src.Stored(reqTP), want)
	}
	h.sink.Hold()
	h.answer("o-1", "echo", `{}`)
	h.result(1)
	h.settle()
	// The resolution marker waits for the result's acknowledgement: a crash
	// in between must leave the intent to be resolved again, never a marker
	// that makes the takeover skip an intent whose result was lost.
	if n := h.sink.Count(pendingT); n != 1 {
		t.Fatalf("%d changelog records before the result was acknowledged, want the pending state alone", n)
	}
	if got := h.src.Stored(respTP); got != -1 {
		t.Fatalf("stored %d before the result was acknowledged", got)
	}
	h.sink.Release()
	if done := h.wait(pendingT, 2); !h.resolvedMarker(done, "o-1") {
		t.Fatalf("the changelog does not record the resolution: %+v", done)
	}
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Stored(respTP) == 1 }); err != nil {
		t.Fatalf("response offset %d after acknowledgement, want 1", h.src.Stored(respTP))
	}
}

func TestFailedDeliveryIsNeverCommitted(t *testing.T) {
	h := start(t, testConfig, config.AtLeastOnce)
	h.sink.FailTopic(echoTopic, errors.New("broker says no"))
	h.request("x-1", "echo", `{}`)
	h.wait(echoTopic, 1)
	// Each settle is a round trip through the event loop, which handles the
	// failed acknowledgement among its inputs.
	for i := 0; h.r.Ready() == nil; i++ {
		if i == 100 {
			t.Fatal("router stayed ready after a failed delivery")
		}
		h.settle()
	}
	h.answer("x-1", "echo", `{}`)
	h.result(1)
	h.settle()
	if got := h.src.Stored(port.TopicPartition{Topic: requests}); got != -1 {
		t.Fatalf("offset %d stored past an undelivered dispatch", got)
	}
}

func TestPendingBoundPausesRequestsOnly(t *testing.T) { both(t, testPendingBoundPausesRequestsOnly) }

func testPendingBoundPausesRequestsOnly(t *testing.T, delivery string) {
	h := start(t, testConfig, delivery) // max_pending: 3
	reqTP, respTP := port.TopicPartition{Topic: requests}, port.TopicPartition{Topic: responses}
	h.src.Push(port.Assigned{reqTP, respTP})
	for i := range 3 {
		h.request("b-"+strconv.Itoa(i), "echo", `{}`)
	}
	h.wait(echoTopic, 3)
	h.advance(5 * time.Millisecond) // a tick notices the bound
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Paused(reqTP) }); err != nil {
		t.Fatal("requests not paused at max_pending")
	}
	if h.src.Paused(respTP) {
		t.Fatal("responses paused: pending intents could never resolve")
	}
	for i := range 3 {
		h.answer("b-"+strconv.Itoa(i), "echo", `{}`)
	}
	h.wait(results, 3)
	h.advance(5 * time.Millisecond)
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return !s.Paused(reqTP) }); err != nil {
		t.Fatal("requests not resumed")
	}
}

func TestRevokedPartitionsForgetTheirPendingIntents(t *testing.T) {
	both(t, testRevokedPartitionsForgetTheirPendingIntents)
}

func testRevokedPartitionsForgetTheirPendingIntents(t *testing.T, delivery string) {
	h := start(t, testConfig, delivery)
	h.request("r-1", "echo", `{}`)
	h.wait(echoTopic, 1)
	h.src.Push(port.Revoked{{Topic: requests, Partition: 0}, {Topic: responses, Partition: 0}})
	h.settleRevoked()
	h.advance(3 * time.Second)
	h.settleRevoked()
	if n := h.sink.Count(results); n != 0 {
		t.Fatalf("a revoked intent was resolved here (%d results); its next owner replays it", n)
	}
}

func TestShutdownClosesSourceAndSink(t *testing.T) { both(t, testShutdownClosesSourceAndSink) }

func testShutdownClosesSourceAndSink(t *testing.T, delivery string) {
	h := start(t, testConfig, delivery)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.r.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if !h.src.Closed() {
		t.Fatal("source not closed")
	}
	if !errors.Is(h.r.Ready(), router.ErrStopped) {
		t.Fatalf("Ready after shutdown = %v", h.r.Ready())
	}
	if err := h.r.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
}

func TestTraceparentTravelsAsAHeader(t *testing.T) { both(t, testTraceparentTravelsAsAHeader) }

func testTraceparentTravelsAsAHeader(t *testing.T, delivery string) {
	h := start(t, testConfig, delivery)
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	h.request("t-1", "echo", `{}`, func(r *schemas.IntentRequest) { r.Traceparent = &tp })
	if !hasHeader(h.wait(echoTopic, 1), port.HeaderTraceparent, tp) {
		t.Fatal("dispatch lacks traceparent")
	}
	h.answer("t-1", "echo", `{}`)
	if !hasHeader(h.wait(results, 1), port.HeaderTraceparent, tp) {
		t.Fatal("result lacks traceparent")
	}
}

func TestAgentErrorResolvesAgentError(t *testing.T) { both(t, testAgentErrorResolvesAgentError) }

func testAgentErrorResolvesAgentError(t *testing.T, delivery string) {
	h := start(t, testConfig, delivery)
	h.request("a-1", "echo", `{}`)
	h.wait(echoTopic, 1)
	h.push(responses, "a-1", &schemas.AgentResponse{RequestID: "a-1", Agent: "echo", Status: schemas.StatusError, Error: &schemas.ErrorInfo{Code: "quota", Message: "rate limited"}})
	res := h.result(1)
	if res.Outcome != schemas.OutcomeAgentError || res.Error == nil || res.Error.Code != "quota" {
		t.Fatalf("result %+v", res)
	}
	b, _ := json.Marshal(res)
	if !strings.Contains(string(b), `"outcome":"agent_error"`) {
		t.Fatalf("json %s", b)
	}
}

func hasHeader(o port.Output, k, v string) bool {
	for _, h := range o.Headers {
		if h.Key == k && string(h.Value) == v {
			return true
		}
	}
	return false
}

var _ = testutil.ToFloat64

// One tenant's good answer is never another tenant's fallback, even for the
// same cache key (context_ref).
func TestFallbackCacheIsScopedByTenant(t *testing.T) {
	h := start(t, testConfig, config.AtLeastOnce)
	as := func(tenant string) func(*schemas.IntentRequest) {
		return func(r *schemas.IntentRequest) { r.ContextRef, r.Tenant = schemas.Ptr("user-1"), schemas.Ptr(tenant) }
	}
	h.request("a-1", "fraud_check", `{}`, as("acme"))
	h.wait(slowTopic, 1)
	h.answer("a-1", "slow", `{"decision":"approve"}`)
	h.result(1)

	h.request("g-1", "fraud_check", `{}`, as("globex"))
	h.wait(slowTopic, 2)
	h.advance(400 * time.Millisecond)
	if res := h.result(2); res.Outcome != schemas.OutcomeFallbackStatic {
		t.Fatalf("globex's timed-out intent got %s %s: another tenant's cached answer", res.Outcome, derefJSON(res.Answer))
	}
	h.request("a-2", "fraud_check", `{}`, as("acme"))
	h.wait(slowTopic, 3)
	h.advance(400 * time.Millisecond)
	if res := h.result(3); res.Outcome != schemas.OutcomeFallbackCache {
		t.Fatalf("acme's own cached answer was not used: %s", res.Outcome)
	}
}

func derefJSON(j *schemas.JSON) string {
	if j == nil {
		return "<nil>"
	}
	return string(*j)
}

// Records the poll goroutine read before a revocation but could not hand
// over yet (the loop was busy) reach the loop after it: they belong to the
// partition's new owner and must not become intents here. Handled, the
// request below became a pending intent nobody else knew this instance
// held, and its timeout a second result for it (the chaos test's broker
// restart found 4 such duplicates).
func TestRecordsReadBeforeARevokeAreSkipped(t *testing.T) {
	both(t, testRecordsReadBeforeARevokeAreSkipped)
}

func testRecordsReadBeforeARevokeAreSkipped(t *testing.T, delivery string) {
	h := start(t, testConfig, delivery, router.WithQueue(1))
	waiting := h.sink.Block()
	h.request("busy", "echo", `{}`) // its dispatch holds the loop
	select {
	case <-waiting:
	case <-h.ctx.Done():
		t.Fatal("the loop never produced")
	}
	h.request("queued", "echo", `{}`) // fills the loop's queue of 1
	h.request("late", "echo", `{}`)   // stays with the poll goroutine
	h.src.Push(port.Revoked{{Topic: requests, Partition: 0}, {Topic: responses, Partition: 0}})
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Pending() == 0 }); err != nil {
		t.Fatal("the source was not read to its end")
	}
	h.sink.Unblock()
	// Assigned again, as after the rebalance: the marker settle sends is
	// then handled, and everything pushed before it was.
	h.src.Push(port.Assigned{{Topic: requests}, {Topic: responses}})
	h.settle()
	for _, o := range h.sink.Outputs(echoTopic) {
		if string(o.Key) == "late" {
			t.Fatal("a request read before the revoke was dispatched after it")
		}
	}
	if got := h.counter("switchboard_records_skipped_revoked_total"); got < 1 {
		t.Fatalf("skipped %v records, want at least 1", got)
	}
	h.advance(3 * time.Second) // past every timeout
	h.settle()
	for _, o := range h.sink.Outputs(results) {
		if string(o.Key) == "late" {
			t.Fatal("a request read before the revoke was resolved here")
		}
	}
}
