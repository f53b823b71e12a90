package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// run runs every scenario against the broker at bootstrap, once with a
// Schema Registry and once without.
func run(t *testing.T, bootstrap string) {
	for _, v := range []struct{ enc, delivery string }{
		{"avro", config.ExactlyOnce}, {"json", config.ExactlyOnce}, {"avro", config.AtLeastOnce}, {"json", config.AtLeastOnce},
	} {
		t.Run(v.enc+"/"+v.delivery, func(t *testing.T) {
			e := newEnv(t, bootstrap, v.enc == "avro", v.delivery)
			t.Run("answered", e.answered)
			t.Run("timeout_then_fallback_static", e.timeoutThenStatic)
			t.Run("late_answer_then_fallback_cache", e.lateAnswerThenCache)
			t.Run("expired_on_arrival", e.expiredOnArrival)
			t.Run("duplicate_response", e.duplicateResponse)
			t.Run("malformed_record_to_dead_letter", e.malformedToDeadLetter)
			t.Run("json_agent_in_any_mode", e.jsonAgent)
			t.Run("cancel_resolves_and_notifies", e.cancel)
			t.Run("retryable_error_is_retried", e.retried)
			t.Run("misrouted_request_is_moved", e.misrouted)
			t.Run("id_squatting_across_tenants", e.idSquatting)
			t.Run("late_intent_is_shed", e.lateShed) // last: it moves the router's clock 2 s ahead
		})
	}
}

const suiteConfig = `
topics:
  requests: %[1]s.request
  responses: %[1]s.response
  results: %[1]s.result
  timeouts: %[1]s.timeout
  progress: %[1]s.progress
  dead_letter: %[1]s.dlq
  pending: %[1]s.pending
  fallback_cache: %[1]s.cache
  context_snapshots: %[1]s.context
  partitions: 3
kafka:
  group_id: %[1]s.router
agents:
  echo: {topic: %[1]s.agent.echo}
  slow: {topic: %[1]s.agent.slow}
  plain: {topic: %[1]s.agent.plain, encoding: json}
  busy: {topic: %[1]s.agent.busy}
intents:
  echo:        {agent: echo, timeout: 5s}
  fraud_check: {agent: slow, timeout: 300ms, fallback: {cache: {max_age: 10m}, static: {decision: review}}}
  lookup:      {agent: plain, timeout: 5s}
  retried:     {agent: echo, timeout: 5s, retry: {max_retries: 1, backoff: 10ms, max_backoff: 10ms}}
  busy:        {agent: busy, timeout: 5s, fallback: {static: {busy: true}}}
`

// awaitTimeout bounds every wait for a record: generous for a loaded CI
// machine, short enough that a lost record fails fast.
const awaitTimeout = 30 * time.Second

// on returns a copy of e that reports to t (a scenario's own subtest).
func (e *env) on(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

// env is one router on one broker, with readers of every topic it writes.
type env struct {
	t       *testing.T
	ctx     context.Context
	cfg     *config.Config
	codec   *schemas.Codec
	clock   *clockwork.FakeClock
	reg     *prometheus.Registry
	kafka   kafkaio.Settings
	pub     *kafkaio.Producer
	results *inbox
	touts   *inbox
	dlq     *inbox
	agents  map[string]*inbox
	router  *router.Router
	// stamp is the router's clock: a record published without a time of
	// its own is stamped with it, so that the router's expired-on-arrival
	// check compares like with like (deadlines run on the fake clock,
	// which the scenarios advance ahead of real time: on a quick host a
	// request stamped with real time arrived already past its 300 ms
	// deadline and was never dispatched).
	stamp clockwork.Clock
}

func newEnv(t *testing.T, bootstrap string, avro bool, delivery string) *env {
	return newEnvWith(t, bootstrap, avro, delivery, suiteConfig, false)
}

// newEnvWith is newEnv with another configuration (a format with the topic
// prefix as %[1]s) and, with realClock, deadlines on real time.
func newEnvWith(t *testing.T, bootstrap string, avro bool, delivery, yamlFormat string, realClock bool) *env {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	prefix := "cf." + randomHex(4)
	cfg, err := config.Parse("conformance.yaml", fmt.Appendf(nil, yamlFormat, prefix), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Kafka.BootstrapServers = bootstrap
	cfg.Router.Delivery = delivery
	e := &env{
		t: t, ctx: ctx, cfg: cfg, clock: clockwork.NewFakeClockAt(time.Now()), reg: prometheus.NewRegistry(),
		kafka: kafkaio.Settings{Bootstrap: bootstrap}, agents: map[string]*inbox{},
	}
	var opts []schemas.CodecOption
	if avro {
		fake := srfake.New()
		t.Cleanup(fake.Close)
		sr, err := schemas.NewRegistry(fake.URL())
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, schemas.WithRegistry(sr))
	}
	if e.codec, err = schemas.NewCodec(opts...); err != nil {
		t.Fatal(err)
	}

	if _, err := kafkaio.EnsureTopics(ctx, e.kafka, cfg.TopicPlans(), true); err != nil {
		t.Fatal(err)
	}
	if e.pub, err = kafkaio.NewProducer(e.kafka); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.pub.Close(5 * time.Second) })

	var wg sync.WaitGroup
	rctx, stop := context.WithCancel(ctx)
	t.Cleanup(func() { stop(); wg.Wait() })
	e.results = e.read(rctx, &wg, cfg.Topics.Results)
	e.touts = e.read(rctx, &wg, cfg.Topics.Timeouts)
	e.dlq = e.read(rctx, &wg, cfg.Topics.DeadLetter)
	for name, a := range cfg.Agents {
		e.agents[name] = e.read(rctx, &wg, a.Topic)
	}

	parts, err := kafkaio.RouterParts(ctx, e.kafka, cfg, e.codec)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("SWITCHBOARD_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	// Deadlines run on the fake clock; exactly_once commits on real time.
	var clock clockwork.Clock = e.clock
	if realClock {
		clock = clockwork.NewRealClock()
	}
	e.stamp = clock
	r, err := router.New(cfg, e.codec, parts.Source, parts.Sink, router.WithRestorer(parts.Restorer), router.WithFallbackFeed(parts.Feed),
		router.WithClock(clock), router.WithCommitClock(clockwork.NewRealClock()),
		router.WithRegisterer(e.reg), router.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	e.router = r
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := r.Run(rctx); err != nil {
			t.Errorf("router: %v", err)
		}
	}()
	return e
}

// inbox collects the records of one topic as they arrive.
type inbox struct {
	mu    sync.Mutex
	recs  []*port.Record
	wake  chan struct{}
	ready chan struct{}
}

func (e *env) read(ctx context.Context, wg *sync.WaitGroup, topic string) *inbox {
	in := &inbox{wake: make(chan struct{}), ready: make(chan struct{})}
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := kafkaio.Read(ctx, e.kafka, kafkaio.Reading{Topics: []string{topic}, From: kafkaio.FromBeginning(), OnStart: func(kafkaio.Offsets) { close(in.ready) }}, func(rec *port.Record) error {
			in.mu.Lock()
			in.recs = append(in.recs, rec)
			close(in.wake)
			in.wake = make(chan struct{})
			in.mu.Unlock()
			return nil
		})
		if err != nil && ctx.Err() == nil {
			e.t.Errorf("reading %s: %v", topic, err)
		}
	}()
	return in
}

// await returns the first record with key for which match holds, waiting
// for it until the suite's deadline.
func (e *env) await(in *inbox, key string, match func(*port.Record) bool) *port.Record {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, awaitTimeout)
	defer cancel()
	for {
		in.mu.Lock()
		wake := in.wake
		for _, r := range in.recs {
			if string(r.Key) == key && (match == nil || match(r)) {
				in.mu.Unlock()
				return r
			}
		}
		in.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			e.t.Fatalf("no record with key %s within %s", key, awaitTimeout)
		}
	}
}

func (in *inbox) count(key string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	n := 0
	for _, r := range in.recs {
		if string(r.Key) == key {
			n++
		}
	}
	return n
}

func (e *env) publish(req *schemas.IntentRequest, ts time.Time) {
	e.t.Helper()
	v, err := e.codec.Encode(e.cfg.Topics.Requests, req)
	if err != nil {
		e.t.Fatal(err)
	}
	if ts.IsZero() {
		ts = e.stamp.Now()
	}
	if err := e.pub.Send(e.ctx, e.cfg.Topics.Requests, []byte(req.IntentID), v, nil, ts); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) intent(typ, payload, contextRef string) *schemas.IntentRequest {
	req := &schemas.IntentRequest{IntentID: typ + "-" + randomHex(6), IntentType: typ, Payload: schemas.JSON(payload)}
	if contextRef != "" {
		req.ContextRef = &contextRef
	}
	return req
}

func (e *env) respond(id, agent, answer string, enc schemas.Encoding) {
	e.t.Helper()
	a := schemas.JSON(answer)
	v, err := e.codec.EncodeAs(enc, e.cfg.Topics.Responses, &schemas.AgentResponse{RequestID: id, Agent: agent, Status: schemas.StatusOK, Answer: &a})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.pub.Send(e.ctx, e.cfg.Topics.Responses, []byte(id), v, nil, time.Time{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) dispatched(agent, id string) *schemas.AgentRequest {
	e.t.Helper()
	var ar schemas.AgentRequest
	if err := e.codec.Decode(e.await(e.agents[agent], id, nil).Value, &ar); err != nil {
		e.t.Fatal(err)
	}
	return &ar
}

func (e *env) result(id string) *schemas.IntentResult {
	e.t.Helper()
	var res schemas.IntentResult
	if err := e.codec.Decode(e.await(e.results, id, nil).Value, &res); err != nil {
		e.t.Fatal(err)
	}
	return &res
}

func (e *env) timeoutEvent(id string) *schemas.IntentTimeout {
	e.t.Helper()
	var to schemas.IntentTimeout
	if err := e.codec.Decode(e.await(e.touts, id, nil).Value, &to); err != nil {
		e.t.Fatal(err)
	}
	return &to
}

// expireThrough moves the router's clock just past a deadline (unix ms). Not
// further: records published next carry the broker's real timestamps, and a
// clock far ahead of them would expire them on arrival.
func (e *env) expireThrough(deadlineMs int64) {
	if d := time.UnixMilli(deadlineMs + 1).Sub(e.clock.Now()); d > 0 {
		e.clock.Advance(d)
	}
}

// waitMetric waits until a counter of the router reaches want.
func (e *env) waitMetric(name string, want float64) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, awaitTimeout)
	defer cancel()
	for {
		if got := gather(e.reg, name); got >= want {
			return
		}
		select {
		case <-ctx.Done():
			e.t.Fatalf("%s never reached %v within %s (at %v)", name, want, awaitTimeout, gather(e.reg, name))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// settle is the barrier of an absence check on the results topic ("key has
// no second result"). It publishes a marker intent of a type nobody serves,
// with an id that lands in the same results partition as key, and waits for
// the marker's result (rejected). The router writes that result after
// everything it did before it read the marker, in the same partition; a
// reader of committed records sees a partition's records in order, so once
// the marker's result is visible, whatever the router wrote under key
// before is too (under exactly_once, in a transaction that is committed by
// then). Call it once the router has handled what is checked (a metric
// moved): a metric moves when the record is handled, before its outputs'
// transaction commits.
func (e *env) settle(key string) {
	e.t.Helper()
	id := e.idBeside("marker", key, e.cfg.Topics.Results)
	e.publish(&schemas.IntentRequest{IntentID: id, IntentType: "marker_nobody_serves", Payload: "{}"}, time.Time{})
	if res := e.result(id); res.Outcome != schemas.OutcomeRejected {
		e.t.Fatalf("marker result %+v, want rejected", res)
	}
}

// idBeside returns a new id, prefix-<random>, that the murmur2 partitioner
// puts in the same partition of topic as key.
func (e *env) idBeside(prefix, key, topic string) string {
	e.t.Helper()
	n := int32(0)
	for _, p := range e.cfg.TopicPlans() {
		if p.Name == topic {
			n = int32(p.Partitions)
		}
	}
	if n <= 0 {
		e.t.Fatalf("no partition count for topic %s", topic)
	}
	want := router.PartitionFor([]byte(key), n)
	for {
		if id := prefix + "-" + randomHex(6); router.PartitionFor([]byte(id), n) == want {
			return id
		}
	}
}

func gather(reg *prometheus.Registry, name string) float64 {
	mfs, _ := reg.Gather()
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// The scenarios.

func (e *env) answered(t *testing.T) {
	e = e.on(t)
	req := e.intent("echo", `{"q":1}`, "")
	before := e.stamp.Now() // the clock the request is stamped with and its deadline runs on
	e.publish(req, time.Time{})
	ar := e.dispatched("echo", req.IntentID)
	if ar.Agent != "echo" || ar.Attempt != 1 || string(ar.Payload) != `{"q":1}` {
		t.Fatalf("dispatched %+v", ar)
	}
	if d := time.UnixMilli(ar.Deadline).Sub(before); d < 4*time.Second || d > 6*time.Second {
		t.Fatalf("deadline %v after publishing, want about the 5s timeout", d)
	}
	e.respond(req.IntentID, "echo", `{"echo":{"q":1}}`, e.codec.Encoding())
	res := e.result(req.IntentID)
	if res.Outcome != schemas.OutcomeAnswered || res.Answer == nil || string(*res.Answer) != `{"echo":{"q":1}}` {
		t.Fatalf("result %+v", res)
	}
	if res.Timeline.DispatchedAt == nil || res.Timeline.AnsweredAt == nil {
		t.Fatalf("timeline %+v", res.Timeline)
	}
}

func (e *env) timeoutThenStatic(t *testing.T) {
	e = e.on(t)
	req := e.intent("fraud_check", `{"amount":1}`, "user-"+randomHex(3))
	e.publish(req, time.Time{})
	ar := e.dispatched("slow", req.IntentID)
	e.expireThrough(ar.Deadline)
	to := e.timeoutEvent(req.IntentID)
	if to.Reason != schemas.ReasonDeadline || to.Fallback != schemas.FallbackStatic || to.Deadline != ar.Deadline {
		t.Fatalf("timeout %+v", to)
	}
	res := e.result(req.IntentID)
	if res.Outcome != schemas.OutcomeFallbackStatic || string(*res.Answer) != `{"decision":"review"}` {
		t.Fatalf("result %+v", res)
	}
}

func (e *env) lateAnswerThenCache(t *testing.T) {
	e = e.on(t)
	user := "user-" + randomHex(3)
	first := e.intent("fraud_check", `{"amount":1}`, user)
	e.publish(first, time.Time{})
	e.expireThrough(e.dispatched("slow", first.IntentID).Deadline)
	if res := e.result(first.IntentID); res.Outcome != schemas.OutcomeFallbackStatic {
		t.Fatalf("first result %+v", res)
	}
	late := gather(e.reg, "switchboard_responses_late_total")
	e.respond(first.IntentID, "slow", `{"decision":"approve"}`, e.codec.Encoding())
	e.waitMetric("switchboard_responses_late_total", late+1)

	second := e.intent("fraud_check", `{"amount":2}`, user)
	e.publish(second, time.Time{})
	e.expireThrough(e.dispatched("slow", second.IntentID).Deadline)
	res := e.result(second.IntentID)
	if res.Outcome != schemas.OutcomeFallbackCache || string(*res.Answer) != `{"decision":"approve"}` {
		t.Fatalf("second result %+v", res)
	}
	if to := e.timeoutEvent(second.IntentID); to.Fallback != schemas.FallbackCache {
		t.Fatalf("timeout %+v", to)
	}
	e.settle(first.IntentID)
	if n := e.results.count(first.IntentID); n != 1 {
		t.Fatalf("the late answer made %d results for its intent", n)
	}
}

func (e *env) expiredOnArrival(t *testing.T) {
	e = e.on(t)
	req := e.intent("fraud_check", `{}`, "")
	e.publish(req, time.Now().Add(-time.Minute))
	to := e.timeoutEvent(req.IntentID)
	if to.Reason != schemas.ReasonExpiredOnArrival {
		t.Fatalf("timeout %+v", to)
	}
	if res := e.result(req.IntentID); res.Outcome != schemas.OutcomeFallbackStatic || res.Timeline.DispatchedAt != nil {
		t.Fatalf("result %+v", res)
	}
	// A later intent to the same agent is dispatched; the expired one never.
	// The later one's dispatch is the barrier: it lands in the partition of
	// the agent's topic where the expired one's would have, after it.
	probe := e.intent("fraud_check", `{}`, "")
	probe.IntentID = e.idBeside("fraud_check", req.IntentID, e.cfg.Agents["slow"].Topic)
	e.publish(probe, time.Time{})
	e.dispatched("slow", probe.IntentID)
	if n := e.agents["slow"].count(req.IntentID); n != 0 {
		t.Fatalf("an intent expired on arrival was dispatched %d times", n)
	}
}

func (e *env) duplicateResponse(t *testing.T) {
	e = e.on(t)
	req := e.intent("echo", `{}`, "")
	e.publish(req, time.Time{})
	e.dispatched("echo", req.IntentID)
	dups := gather(e.reg, "switchboard_responses_duplicate_total")
	e.respond(req.IntentID, "echo", `1`, e.codec.Encoding())
	e.result(req.IntentID)
	e.respond(req.IntentID, "echo", `2`, e.codec.Encoding())
	e.waitMetric("switchboard_responses_duplicate_total", dups+1)
	e.settle(req.IntentID)
	if n := e.results.count(req.IntentID); n != 1 {
		t.Fatalf("%d results after a duplicate response", n)
	}
	if res := e.result(req.IntentID); string(*res.Answer) != `1` {
		t.Fatalf("the duplicate changed the answer: %s", *res.Answer)
	}
}

func (e *env) malformedToDeadLetter(t *testing.T) {
	e = e.on(t)
	id := "bad-" + randomHex(4)
	if err := e.pub.Send(e.ctx, e.cfg.Topics.Requests, []byte(id), []byte(`{"intent_id": "`+id+`", "intent_type": `), nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	dl := e.await(e.dlq, id, nil)
	h := map[string]string{}
	for _, x := range dl.Headers {
		h[x.Key] = string(x.Value)
	}
	if h[port.HeaderOriginalTopic] != e.cfg.Topics.Requests || h[port.HeaderErrorClass] == "" || h[port.HeaderOriginalOffset] == "" || h[port.HeaderErrorMessage] == "" {
		t.Fatalf("dead-letter headers %v", h)
	}
	res := e.result(id)
	if res.Outcome != schemas.OutcomeRejected || res.Error == nil || res.Error.Code != h[port.HeaderErrorClass] {
		t.Fatalf("result %+v", res)
	}
	// The router keeps routing.
	ok := e.intent("echo", `{}`, "")
	e.publish(ok, time.Time{})
	e.dispatched("echo", ok.IntentID)
}

// jsonAgent: an agent that asked for JSON requests gets JSON whatever the
// default, and may answer in JSON; kcat users rely on both.
func (e *env) jsonAgent(t *testing.T) {
	e = e.on(t)
	req := e.intent("lookup", `{"k":"v"}`, "")
	e.publish(req, time.Time{})
	raw := e.await(e.agents["plain"], req.IntentID, nil)
	if !strings.HasPrefix(string(raw.Value), "{") {
		t.Fatalf("a json agent got a non-JSON request: %q", raw.Value)
	}
	var ar map[string]any
	if err := json.Unmarshal(raw.Value, &ar); err != nil || ar["intent_id"] != req.IntentID {
		t.Fatalf("request %s: %v", raw.Value, err)
	}
	if p, ok := ar["payload"].(map[string]any); !ok || p["k"] != "v" {
		t.Fatalf("the payload is not embedded JSON: %s", raw.Value)
	}
	resp := fmt.Sprintf(`{"request_id":%q,"agent":"plain","status":"ok","answer":{"v":1}}`, req.IntentID)
	if err := e.pub.Send(e.ctx, e.cfg.Topics.Responses, []byte(req.IntentID), []byte(resp), nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if res := e.result(req.IntentID); res.Outcome != schemas.OutcomeAnswered || string(*res.Answer) != `{"v":1}` {
		t.Fatalf("result %+v", res)
	}
}

// misrouted: a request produced to another partition than the murmur2 hash of
// its key (as kcat's default partitioner does) is moved and still served; and
// the router's murmur2 agrees with librdkafka's murmur2_random, since no other
// record of the suite was moved.
func (e *env) misrouted(t *testing.T) {
	e = e.on(t)
	if n := gather(e.reg, "switchboard_records_moved_total"); n != 0 {
		t.Fatalf("%v records produced with murmur2_random were moved: the router's murmur2 differs from librdkafka's", n)
	}
	req := e.intent("echo", `{"moved":true}`, "")
	n := int32(e.cfg.Topics.Partitions)
	wrong := (router.PartitionFor([]byte(req.IntentID), n) + 1) % n
	v, err := e.codec.Encode(e.cfg.Topics.Requests, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.pub.SendTo(e.ctx, e.cfg.Topics.Requests, wrong, []byte(req.IntentID), v, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	e.dispatched("echo", req.IntentID)
	e.respond(req.IntentID, "echo", `{"ok":1}`, e.codec.Encoding())
	if res := e.result(req.IntentID); res.Outcome != schemas.OutcomeAnswered {
		t.Fatalf("moved request: %+v", res)
	}
	if got := gather(e.reg, "switchboard_records_moved_total"); got != 1 {
		t.Fatalf("moved = %v, want 1", got)
	}
}

// cancel: a cancel record (a header marks it) resolves a dispatched intent
// cancelled and reaches the agent's topic as a notice with the header.
func (e *env) cancel(t *testing.T) {
	e = e.on(t)
	req := e.intent("echo", `{}`, "")
	e.publish(req, time.Time{})
	e.dispatched("echo", req.IntentID)
	control := []port.Header{{Key: intents.HeaderControl, Value: []byte(intents.ControlCancel)}}
	if err := e.pub.Send(e.ctx, e.cfg.Topics.Requests, []byte(req.IntentID), nil, control, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if res := e.result(req.IntentID); res.Outcome != schemas.OutcomeCancelled {
		t.Fatalf("result %+v", res)
	}
	notice := e.await(e.agents["echo"], req.IntentID, func(r *port.Record) bool {
		for _, h := range r.Headers {
			if h.Key == intents.HeaderControl && string(h.Value) == intents.ControlCancel {
				return true
			}
		}
		return false
	})
	if c, err := intents.UnmarshalCancel(notice.Key, notice.Value); err != nil || c.IntentID != req.IntentID {
		t.Fatalf("notice %q: %v", notice.Value, err)
	}
	late := gather(e.reg, "switchboard_responses_late_total")
	e.respond(req.IntentID, "echo", `1`, e.codec.Encoding())
	e.waitMetric("switchboard_responses_late_total", late+1)
	e.settle(req.IntentID)
	if n := e.results.count(req.IntentID); n != 1 {
		t.Fatalf("%d results for a cancelled intent", n)
	}
}

// retried: a retryable error from attempt 1 sends attempt 2, whose answer
// resolves the intent.
func (e *env) retried(t *testing.T) {
	e = e.on(t)
	req := e.intent("retried", `{}`, "")
	e.publish(req, time.Time{})
	e.dispatched("echo", req.IntentID)
	v, err := e.codec.Encode(e.cfg.Topics.Responses, &schemas.AgentResponse{
		RequestID: req.IntentID, Agent: "echo", Status: schemas.StatusError, Attempt: schemas.Ptr[int32](1),
		Error: &schemas.ErrorInfo{Code: "busy", Message: "busy", Retryable: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	retries := gather(e.reg, "switchboard_intent_retries_total")
	if err := e.pub.Send(e.ctx, e.cfg.Topics.Responses, []byte(req.IntentID), v, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	e.waitMetric("switchboard_intent_retries_total", retries+1)
	e.clock.Advance(20 * time.Millisecond) // past the backoff
	second := e.await(e.agents["echo"], req.IntentID, func(r *port.Record) bool {
		var ar schemas.AgentRequest
		return e.codec.Decode(r.Value, &ar) == nil && ar.Attempt == 2
	})
	if second == nil {
		t.Fatal("no second attempt")
	}
	e.respond(req.IntentID, "echo", `{"ok":2}`, e.codec.Encoding())
	if res := e.result(req.IntentID); res.Outcome != schemas.OutcomeAnswered || res.Attempts != 2 {
		t.Fatalf("result %+v", res)
	}
}

// idSquatting: an intent's identity is (tenant, intent_id). globex posts an
// id first, of a type nobody serves, and is rejected; acme's intent with
// that id is not a duplicate: it is dispatched with acme's tenant, and the
// response that names acme answers it. Each tenant has one result.
func (e *env) idSquatting(t *testing.T) {
	e = e.on(t)
	id := "squat-" + randomHex(6)
	globex, acme := "globex", "acme"
	dups := gather(e.reg, "switchboard_intents_duplicate_total")
	e.publish(&schemas.IntentRequest{IntentID: id, IntentType: "no_such_type", Payload: "{}", Tenant: &globex}, time.Time{})
	e.publish(&schemas.IntentRequest{IntentID: id, IntentType: "echo", Payload: `{"who":"acme"}`, Tenant: &acme}, time.Time{})
	ar := e.dispatched("echo", id)
	if ar.Tenant == nil || *ar.Tenant != acme {
		t.Fatalf("dispatched %+v", ar)
	}
	a := schemas.JSON(`{"to":"acme"}`)
	v, err := e.codec.Encode(e.cfg.Topics.Responses, &schemas.AgentResponse{RequestID: id, Agent: "echo", Status: schemas.StatusOK, Answer: &a, Tenant: &acme})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.pub.Send(e.ctx, e.cfg.Topics.Responses, []byte(id), v, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	of := func(tenant string) *schemas.IntentResult {
		var res schemas.IntentResult
		e.await(e.results, id, func(r *port.Record) bool {
			return e.codec.Decode(r.Value, &res) == nil && res.Tenant != nil && *res.Tenant == tenant
		})
		return &res
	}
	if res := of(globex); res.Outcome != schemas.OutcomeRejected {
		t.Fatalf("globex: %+v", res)
	}
	if res := of(acme); res.Outcome != schemas.OutcomeAnswered || string(*res.Answer) != `{"to":"acme"}` {
		t.Fatalf("acme: %+v", res)
	}
	e.settle(id)
	if n := e.results.count(id); n != 2 {
		t.Fatalf("%d results for the id, want one per tenant", n)
	}
	if got := gather(e.reg, "switchboard_intents_duplicate_total"); got != dups {
		t.Fatalf("duplicates counted: %v", got)
	}
}

// lateShed: an intent read too late for its agent to answer in time is shed
// with its fallback and never dispatched; one with room is dispatched; the
// shed intent has one result, even when its request comes again.
func (e *env) lateShed(t *testing.T) {
	e = e.on(t)
	// Teach busy's answer time: 8 answers, each read 2 s after its
	// dispatch on the router's clock (2,000 ms).
	ids := make([]string, 8)
	for i := range ids {
		req := e.intent("busy", `{}`, "")
		ids[i] = req.IntentID
		e.publish(req, time.Time{})
	}
	for _, id := range ids {
		e.dispatched("busy", id)
	}
	e.clock.Advance(2 * time.Second)
	for _, id := range ids {
		e.respond(id, "busy", `{}`, e.codec.Encoding())
	}
	for _, id := range ids {
		if res := e.result(id); res.Outcome != schemas.OutcomeAnswered {
			t.Fatalf("warm-up result %+v", res)
		}
	}
	inFlight := e.intent("busy", `{}`, "") // the estimate is trusted while something is in flight
	e.publish(inFlight, time.Time{})
	e.dispatched("busy", inFlight.IntentID)

	// Waited 3.5 of its 5 s: 1.5 s left, less than the 2 s busy takes.
	late := e.intent("busy", `{}`, "")
	e.publish(late, e.stamp.Now().Add(-3500*time.Millisecond))
	if to := e.timeoutEvent(late.IntentID); to.Reason != schemas.ReasonShed || to.Fallback != schemas.FallbackStatic {
		t.Fatalf("timeout %+v, want reason shed with the static fallback", to)
	}
	if res := e.result(late.IntentID); res.Outcome != schemas.OutcomeShed || res.Answer == nil || string(*res.Answer) != `{"busy":true}` || res.Timeline.DispatchedAt != nil {
		t.Fatalf("result %+v, want shed with the static answer, never dispatched", res)
	}
	// Waited 2 s: 3 s left, room for an answer. Its dispatch lands where
	// the late one's would have, after it: the barrier of the check below.
	room := e.intent("busy", `{}`, "")
	room.IntentID = e.idBeside("busy", late.IntentID, e.cfg.Agents["busy"].Topic)
	e.publish(room, e.stamp.Now().Add(-2*time.Second))
	e.dispatched("busy", room.IntentID)
	if n := e.agents["busy"].count(late.IntentID); n != 0 {
		t.Fatalf("a shed intent was dispatched %d times", n)
	}
	dups := gather(e.reg, "switchboard_intents_duplicate_total")
	e.publish(late, e.stamp.Now().Add(-3500*time.Millisecond)) // the caller's producer retries
	e.waitMetric("switchboard_intents_duplicate_total", dups+1)
	e.settle(late.IntentID)
	if n := e.results.count(late.IntentID); n != 1 {
		t.Fatalf("a shed intent has %d results", n)
	}
	if got := gather(e.reg, "switchboard_intents_shed_total"); got != 1 {
		t.Fatalf("switchboard_intents_shed_total = %v, want 1", got)
	}
	for _, id := range []string{inFlight.IntentID, room.IntentID} {
		e.respond(id, "busy", `{}`, e.codec.Encoding())
		if res := e.result(id); res.Outcome != schemas.OutcomeAnswered {
			t.Fatalf("result %+v", res)
		}
	}
}
