package router

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/intents/payload"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
	"github.com/switchboard-mcp/switchboard/timeouts"
)

// Error classes the router adds to schemas' decoding classes.
const (
	ClassInvalidIntent   = "invalid_intent"
	ClassUnroutable      = "unroutable"
	ClassInvalidResponse = "invalid_response"
	ClassEncode          = "encode_failed"
)

type route struct {
	name        string
	agent       *agentRoute
	policy      intents.TimeoutPolicy
	cacheKey    string // config.CacheKey*; "" when the type has no cache fallback
	cacheMaxAge time.Duration
	static      *schemas.JSON
	retry       *retryPolicy // nil: no retries
	idleMs      int64        // 0: no idle timeout
	progress    progressLimits
	m           *routeMetrics

	attachContext bool // context: attach
	contextMaxAge time.Duration

	input *payload.Schema // input_schema (payload.go); nil: none
}

// pending is an intent dispatched and not yet resolved.
type pending struct {
	id          string
	key         string // intentKey(tenant, id): its key in the pending table and the dedup window
	logKey      string // the key of its changelog record (key, or the key it was restored from)
	logKeyB     []byte // logKey as record-key bytes, made once (outputs are not modified by sinks)
	bytes       int64  // what it holds, as the budget counted it
	route       *route
	agent       *agentRoute
	partition   int32
	cacheKey    string
	payload     schemas.JSON
	contextRef  *string
	sessionID   *string
	tenant      *string
	traceparent *string
	recordTs    int64
	receivedAt  int64
	dispatched  int64
	inherited   bool // dispatched by a previous owner (restored): its answer time spans the takeover (overload.go)
	deadline    int64
	attempt     int32
	timer       timeouts.Timer
	persisted   bool         // written to the pending changelog: its resolution writes a tombstone
	unsaved     *port.Output // its newest changelog record, not written yet (engine.deferred)
	sent        *port.Output // engine.deferred: its newest dispatch, until its state is written after it (save)
	unsavedAt   int64        // when its first state not written yet was made
	holds       []*track     // the records its unsaved record was caused by, held
	heldSince   int64        // past its deadline, waiting for the responses to catch up (0: not held)
	phase       phase
	retryAt     int64      // phaseRetry: when it is dispatched again
	idleAt      int64      // phaseInFlight with an idle timeout: when it times out idle
	probe       probeEpoch // dispatched to probe a half-open circuit: which period; 0: not a probe

	contextVersion *int64 // the context snapshot attached at dispatch, if any
	contextTs      *int64
	progress       progressState // progress.go
	spans          *intentSpans  // tracing.go; nil: tracing off, or not started

	idKey []byte // id as a record key, made once and shared by its outputs (see keyBytes)
}

// emitFunc hands an output to the sink; a non-nil track waits for its
// acknowledgement.
type emitFunc func(o *port.Output, t *track)

// engine is the router's state machine. It is owned by the event loop and
// never blocks: every effect is an Output handed to emit.
type engine struct {
	topics  config.Topics
	codec   *schemas.Codec
	routes  map[string]*route
	agents  map[string]*agentRoute
	unknown *route
	pending map[string]*pending // by intentKey
	// pendingIDs finds the tenants with an intent of an id pending;
	// budget counts the bytes pending intents hold.
	pendingIDs idIndex
	budget     *budget
	wheel      *timeouts.Wheel[*pending]
	cache      *timeouts.FallbackCache
	resolved   *resolvedWindow
	m          *metrics
	log        *slog.Logger
	emit       emitFunc
	toAgent    emitFunc // what goes to an agent's topic: dispatches (retries too) and cancel notices
	failed     func(error)
	owns       func(partition int32) bool // whether this instance owns a requests partition
	contexts   ContextLookup              // nil: none
	trace      *intentTracer              // tracing.go; nil: tracing off
	nowMs      int64                      // the time of the current tick, for the wheel's callback

	deferred deferredStates // at_least_once: pending states written late (persist.go)

	// agentList is agents by name; woken are the agents whose queue may
	// move after the current event (see admission.go).
	agentList []*agentRoute
	woken     []*agentRoute
	rnd       func(n int64) int64 // uniform in [0, n): retry jitter

	// held are intents past their deadline whose responses partition this
	// instance has not read up to the deadline yet (it lags, or it just took
	// the partition over), by partition: they wait until it has, so an agent
	// that answered in time is not reported as timed out.
	held    map[int32][]*pending
	holdMax int64 // ms: how long an intent is held at most
	// read says how far each responses partition has been read.
	read map[int32]*readProgress

	// arena holds the outputs and values of the hot path (arena.go).
	arena arena

	// scratch holds the records the engine encodes and forgets at once,
	// filled anew for each encode (the codec keeps no reference), so the
	// hot path allocates none of them.
	scratch struct {
		ar         schemas.AgentRequest
		pi         schemas.PendingIntent
		res        schemas.IntentResult
		resolvedAt int64
		outcome    string
		answeredAt int64

		// req and resp are what the records in hand decode into: an
		// intent keeps the values of their fields (strings and pointers
		// the codec allocated), never the records' addresses.
		req  schemas.IntentRequest
		resp schemas.AgentResponse
	}
}

// readProgress is how far a responses partition has been read: to its end
// (nothing newer exists), or up to the newest record timestamp seen, and when
// a record was last read.
type readProgress struct {
	atEnd      bool
	maxTs      int64
	lastReadAt int64
	// takenOver: just assigned, its backlog not read to its end yet; only an
	// end-of-partition or a later record proves it has been read.
	takenOver bool
}

// quietMs: a partition that has not delivered a record for this long (and
// was not just taken over) is taken as read to its end. The end-of-partition
// event says so too, but only with the next empty fetch, which waits up to
// fetch.wait.max.ms (500 ms): without this, timeouts on a quiet partition
// would fire that much late.
const quietMs = 100

func newEngine(cfg *config.Config, codec *schemas.Codec, m *metrics, log *slog.Logger, nowMs int64) (*engine, error) {
	wheel, err := timeouts.NewWheel[*pending](cfg.Router.Tick.D(), nowMs)
	if err != nil {
		return nil, err
	}
	e := &engine{
		topics:  cfg.Topics,
		codec:   codec,
		routes:  map[string]*route{},
		agents:  map[string]*agentRoute{},
		pending: map[string]*pending{},
		wheel:   wheel,
		budget:  newBudget(cfg.Router.MaxPendingBytesPerTenant),

		pendingIDs: idIndex{},
		cache:      timeouts.NewFallbackCache(cfg.Router.FallbackCacheSize),
		resolved:   newResolvedWindow(cfg.Router.DedupWindow.D().Milliseconds(), nowMs),
		m:          m,
		log:        log,
		unknown:    &route{name: unknownType, m: m.forRoute(unknownType, "")},
		held:       map[int32][]*pending{},
		holdMax:    10_000,
		read:       map[int32]*readProgress{},
	}
	for name, a := range cfg.Agents {
		ar := newAgentRoute(name, a, m, nowMs)
		e.agents[name] = ar
		e.agentList = append(e.agentList, ar)
	}
	slices.SortFunc(e.agentList, func(a, b *agentRoute) int { return strings.Compare(a.name, b.name) })
	e.routes = e.routesOf(cfg)
	return e, nil
}

// onRequest handles one record of the requests topic.
func (e *engine) onRequest(rec *port.Record, t *track, nowMs int64) {
	if control, ok := controlOf(rec); ok {
		e.onControl(rec, control, t, nowMs)
		return
	}
	req := &e.scratch.req
	if err := e.codec.Decode(rec.Value, req); err != nil {
		e.unknown.m.received.Inc()
		e.reject(rec, t, schemas.ErrorClass(err), err, nil, nowMs)
		return
	}
	if err := intents.Validate(req); err != nil {
		e.routeOf(req.IntentType).m.received.Inc()
		e.reject(rec, t, ClassInvalidIntent, err, req, nowMs)
		return
	}
	r := e.routes[req.IntentType]
	if r == nil {
		e.unknown.m.received.Inc()
		e.reject(rec, t, ClassUnroutable, fmt.Errorf("no route for intent type %q: add it under intents in the configuration", req.IntentType), req, nowMs)
		return
	}
	r.m.received.Inc()
	if rec.TimestampMs <= 0 {
		rec.TimestampMs = nowMs // a record without a timestamp starts its timeout now
	}
	agent := r.agent
	if req.TargetAgent != nil && *req.TargetAgent != agent.name {
		agent = e.agents[*req.TargetAgent]
		if agent == nil {
			e.reject(rec, t, ClassUnroutable, fmt.Errorf("target_agent %q is not a configured agent", *req.TargetAgent), req, nowMs)
			return
		}
	}
	key := intentKey(req.Tenant, req.IntentID)
	logKey := key
	if e.known(key) {
		prior, ok := e.replayOverRejection(rec, key)
		if !ok {
			e.m.dupIntents.Inc()
			return
		}
		logKey = prior
	}
	if e.payloadFails(rec, t, r, req, nowMs) {
		return
	}
	p := &pending{
		id:          req.IntentID,
		key:         key,
		logKey:      logKey,
		route:       r,
		agent:       agent,
		partition:   rec.Partition,
		cacheKey:    cacheKeyOf(r.cacheKey, req),
		payload:     req.Payload,
		contextRef:  req.ContextRef,
		sessionID:   req.SessionID,
		tenant:      req.Tenant,
		traceparent: req.Traceparent,
		recordTs:    rec.TimestampMs,
		receivedAt:  nowMs,
		deadline:    intents.Deadline(rec.TimestampMs, req.TimeoutMs, r.policy),
		attempt:     1,
	}
	e.trace.received(p, rec)
	if !e.budget.admits(p) {
		e.shedOverBudget(p, nowMs, t)
		return
	}
	if p.deadline <= nowMs {
		e.timeOut(p, nowMs, schemas.ReasonExpiredOnArrival, t)
		return
	}
	e.admit(p, nowMs, t)
}

// known reports whether the intent of key is pending or was resolved within
// the dedup window: a request for it is a duplicate.
func (e *engine) known(key string) bool {
	if _, ok := e.pending[key]; ok {
		return true
	}
	_, ok := e.resolved.get(key)
	return ok
}

// dispatch sends an intent to its agent, records it in the pending
// changelog, and starts its timer. The caller has checked admission.
func (e *engine) dispatch(p *pending, nowMs int64, t *track) {
	tp := e.trace.dispatched(p, nowMs) // the attempt span's traceparent, else p's
	ar := &e.scratch.ar
	*ar = schemas.AgentRequest{
		IntentID:    p.id,
		IntentType:  p.route.name,
		Agent:       p.agent.name,
		Payload:     p.payload,
		ContextRef:  p.contextRef,
		Deadline:    p.deadline,
		Attempt:     p.attempt,
		SessionID:   p.sessionID,
		Tenant:      p.tenant,
		Traceparent: tp,
	}
	e.attachContext(p, ar)
	enc := schemas.EncodingDefault
	if p.agent.json {
		enc = schemas.EncodingJSON
	}
	value, err := e.arena.encodeDecoded(e.codec, enc, p.agent.topic, ar)
	if err != nil {
		e.encodeFailed(t, err)
		e.unpersisted(p, nowMs, t)
		return
	}
	p.dispatched, p.inherited = nowMs, false
	p.phase, p.retryAt, p.idleAt = phaseInFlight, 0, 0
	if p.route.idleMs > 0 {
		p.idleAt = nowMs + p.route.idleMs
	}
	if !e.persist(p, nowMs, t) {
		e.unpersisted(p, nowMs, t)
		return
	}
	sent := e.arena.output(port.Output{Topic: p.agent.topic, Key: p.keyBytes(), Value: value, Headers: traceHeaders(tp)})
	e.toAgent(sent, t)
	if e.deferred.on {
		e.unchain(p) // a state waiting for the previous dispatch: the one persist made replaces it
		p.sent = sent
	}
	a := p.agent
	a.inFlight++
	if a.rate > 0 {
		a.tokens--
	}
	if a.breaker != nil {
		p.probe = a.breaker.dispatched(nowMs)
	}
	e.keep(p)
	e.schedule(p)
	p.route.m.dispatched.Inc()
}

// tick advances the wheel and the dedup window to nowMs.
func (e *engine) tick(nowMs int64) {
	e.nowMs = nowMs
	e.wheel.Advance(nowMs, e.onExpire)
	e.pumpAll(nowMs)
	e.resolved.rotate(nowMs, func(gone map[string]resolvedEntry) {
		for _, r := range gone {
			if r.persisted && e.owns(r.partition) {
				part := r.partition
				e.emit(&port.Output{Topic: e.topics.Pending, Partition: &part, Key: []byte(r.logKey)}, nil) // tombstone
			}
		}
	})
	for part, held := range e.held {
		if len(held) == 0 {
			continue
		}
		if nowMs-held[0].heldSince >= e.holdMax {
			e.releaseHeld(part, func(*pending) bool { return true }, nowMs)
			continue
		}
		e.releaseHeld(part, func(p *pending) bool { return e.readPast(part, p.deadline) }, nowMs)
	}
}

// onExpire is the wheel's callback: an intent's retry is due, or its idle
// deadline or deadline passed. A dispatched intent times out unless the
// responses that could still answer it in time have not been read yet.
func (e *engine) onExpire(_ int64, p *pending) {
	p.timer = timeouts.Timer{}
	now := e.nowMs
	switch {
	case p.phase == phaseRetry:
		e.retryNow(p, now)
		return
	case p.phase == phaseQueued && p.dispatched == 0:
		// Never dispatched: no response can come, and it is never sent.
		e.timeOut(p, now, schemas.ReasonDeadline, nil)
		return
	case p.phase == phaseQueued:
		// A retry waiting in the queue: it is never sent again, but an
		// answer to an earlier attempt may still be unread.
		e.leave(p)
	case p.idleAt != 0 && now < p.deadline:
		if !e.readPast(p.partition, p.idleAt) {
			p.timer = e.wheel.Schedule(min(p.deadline, now+quietMs), p)
			return
		}
		e.timeOut(p, now, schemas.ReasonIdle, nil)
		return
	}
	if !e.readPast(p.partition, p.deadline) {
		e.hold(p, e.nowMs)
		return
	}
	e.timeOut(p, e.nowMs, schemas.ReasonDeadline, nil)
}

// timeOut publishes the timeout event and resolves the intent with its
// fallback: the cache, else the static answer, else timed_out. An intent shed
// (its agent's queue was full) or refused by an open circuit resolves shed or
// circuit_open instead, with the fallback answer if any.
func (e *engine) timeOut(p *pending, nowMs int64, reason schemas.TimeoutReason, cause *track) {
	if j := e.joinHolds(p, cause); j != cause {
		defer e.unhold(j, cause)
		cause = j
	}
	answer, outcome, kind := e.fallback(p, nowMs)
	switch reason {
	case schemas.ReasonShed:
		outcome = schemas.OutcomeShed
	case schemas.ReasonCircuitOpen:
		outcome = schemas.OutcomeCircuitOpen
	case schemas.ReasonDeadline:
		e.recordOutcome(p, outcomeTimedOut, nowMs) // a dispatched intent that timed out is a failure
	case schemas.ReasonIdle:
		e.recordOutcome(p, outcomeIdle, nowMs)
	}
	e.trace.timedOut(p, reason, kind, nowMs)
	ev := &schemas.IntentTimeout{
		IntentID:   p.id,
		IntentType: p.route.name,
		Agent:      p.agentName(),
		Deadline:   p.deadline,
		TimedOutAt: nowMs,
		ElapsedMs:  nowMs - p.recordTs,
		Reason:     reason,
		Fallback:   kind,
		Tenant:     p.tenant,
		SessionID:  p.sessionID,
	}
	value, err := e.codec.Encode(e.topics.Timeouts, ev)
	if err != nil {
		e.encodeFailed(cause, err)
		return
	}
	if c := p.route.m.timeouts[reason]; c != nil {
		c.Inc()
	}
	event := &port.Output{Topic: e.topics.Timeouts, Key: p.keyBytes(), Value: value, Headers: p.headers()}
	e.resolveWith(p, outcome, answer, nil, 0, nowMs, cause, event)
}

// resolve writes the intent's one result, tombstones its pending state, and
// forgets it. cause is the record that resolved it (nil for a timer).
func (e *engine) resolve(p *pending, outcome schemas.Outcome, answer *schemas.JSON, errInfo *schemas.ErrorInfo, answeredAt, nowMs int64, cause *track) {
	e.resolveWith(p, outcome, answer, errInfo, answeredAt, nowMs, cause, nil)
}

// resolveWith is resolve with the intent's timeout event (timeOut), if
// any, written after the result and before the resolution marker: under
// at_least_once a crash between them leaves the intent to be resolved
// again (a second result, which at_least_once allows), never a timeout
// event whose result was lost and replaced by an answer.
func (e *engine) resolveWith(p *pending, outcome schemas.Outcome, answer *schemas.JSON, errInfo *schemas.ErrorInfo, answeredAt, nowMs int64, cause *track, event *port.Output) {
	if j := e.resolving(p, cause); j != cause {
		defer e.unhold(j, cause)
		cause = j
	}
	if p.timer != (timeouts.Timer{}) {
		e.wheel.Cancel(p.timer)
		p.timer = timeouts.Timer{}
	}
	if p.agent != nil {
		e.leave(p)
	}
	e.drop(p)
	res := &e.scratch.res
	*res = schemas.IntentResult{
		IntentID:   p.id,
		IntentType: p.route.name,
		Agent:      p.agentName(),
		Outcome:    outcome,
		Answer:     answer,
		Error:      errInfo,
		SessionID:  p.sessionID,
		Tenant:     p.tenant,
		Attempts:   p.attempt,
		Timeline: schemas.Timeline{
			ReceivedAt: p.receivedAt,
			ResolvedAt: nowMs,
			Deadline:   p.deadline,
		},
	}
	if p.dispatched != 0 {
		res.Timeline.DispatchedAt = &p.dispatched
	}
	if answeredAt != 0 {
		e.scratch.answeredAt = answeredAt
		res.Timeline.AnsweredAt = &e.scratch.answeredAt
	}
	res.Timeline.ContextVersion, res.Timeline.ContextTs = p.contextVersion, p.contextTs
	res.Timeline.TraceID = traceIDOf(p)
	e.trace.resolved(p, outcome, nowMs)
	res.ProgressCount = p.progressCount()
	// Whatever happens to the outputs below, the intent is resolved here:
	// the dedup window keeps any later record of it from a second result.
	value, err := e.arena.encode(e.codec, schemas.EncodingDefault, e.topics.Results, res)
	if err != nil {
		e.encodeFailed(cause, err)
		e.resolved.add(p.key, p.resolvedEntry(outcome, p.persisted))
		if event != nil {
			e.emit(event, cause)
		}
		return
	}
	key := p.keyBytes()
	result := e.arena.output(port.Output{Topic: e.topics.Results, Key: key, Value: value, Headers: p.headers()})
	// The changelog remembers the resolution (rejections too) for the dedup
	// window, so that a duplicate request is not dispatched again, nor
	// resolved again, even after a takeover; the window's rotation
	// tombstones it. It holds a marker (resolvedRecord), not the payload.
	state, err := e.arena.encode(e.codec, schemas.EncodingDefault, e.topics.Pending, e.resolvedRecord(p, nowMs, outcome))
	remember := err == nil
	if err != nil {
		// The result is out: remember the resolution here at least, and
		// tombstone the pending record so that no takeover resurrects it.
		e.encodeFailed(cause, err)
		state = nil
	}
	if remember || p.persisted {
		// After the result, never before it: under at_least_once a crash
		// between the two must leave the intent to be resolved again (a
		// second result, which at_least_once allows), not a marker that
		// makes the takeover skip an intent whose result was lost.
		result.Then = e.arena.output(p.changelog(e.topics.Pending, state))
	}
	if event != nil { // result, timeout event, marker
		event.Then, result.Then = result.Then, event
	}
	e.emit(result, cause)
	e.resolved.add(p.key, p.resolvedEntry(outcome, remember))
	p.route.m.resolved[outcome].Inc()
	if p.recordTs > 0 {
		p.route.m.seconds[outcome].Observe(float64(nowMs-p.recordTs) / 1000)
	}
}

// resolvedEntry is what the dedup window remembers of p.
func (p *pending) resolvedEntry(outcome schemas.Outcome, persisted bool) resolvedEntry {
	return resolvedEntry{
		route: p.route, agent: p.agentName(), cacheKey: p.cacheKey, logKey: p.logKey, outcome: outcome,
		partition: p.partition, persisted: persisted, dispatched: p.dispatched != 0, dispatchedAt: p.ownDispatch(),
	}
}

// forgetPartition drops the pending intents of a revoked requests partition:
// their requests were not committed, so the partition's next owner replays
// them.
func (e *engine) forgetPartition(partition int32) int {
	n := 0
	for _, p := range e.pending {
		if p.partition == partition {
			if p.timer != (timeouts.Timer{}) {
				e.wheel.Cancel(p.timer)
			}
			e.leave(p)
			e.drop(p)
			e.unchain(p) // never written: another member may own the partition now
			e.dropHolds(p)
			n++
		}
	}
	delete(e.held, partition)
	delete(e.read, partition)
	e.resolved.forgetPartition(partition)
	return n
}

func (e *engine) routeOf(intentType string) *route {
	if r := e.routes[intentType]; r != nil {
		return r
	}
	return e.unknown
}

func (p *pending) headers() []port.Header { return traceHeaders(p.traceparent) }

func (p *pending) agentName() string {
	if p.agent == nil {
		return ""
	}
	return p.agent.name
}

func validID(s string) bool { return intents.ValidID(s) }
