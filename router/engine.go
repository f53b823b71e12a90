package router

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/intents/payload"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/schemas"
	"github.com/switchboard-mcp/switchboard/timeouts"
)

// Dead-letter headers: where a record came from and why it was set aside.
const (
	HeaderOriginalTopic     = "switchboard.original.topic"
	HeaderOriginalPartition = "switchboard.original.partition"
	HeaderOriginalOffset    = "switchboard.original.offset"
	HeaderErrorClass        = "switchboard.error.class"
	HeaderErrorMessage      = "switchboard.error.message"
	HeaderTraceparent       = "traceparent"
	// HeaderMovedFrom marks a record the router moved to the partition its
	// key hashes to, with the partition it was produced to.
	HeaderMovedFrom = "switchboard.moved.from"
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
	deadline    int64
	attempt     int32
	timer       timeouts.Timer
	persisted   bool  // written to the pending changelog: its resolution writes a tombstone
	heldSince   int64 // past its deadline, waiting for the responses to catch up (0: not held)
	phase       phase
	retryAt     int64      // phaseRetry: when it is dispatched again
	idleAt      int64      // phaseInFlight with an idle timeout: when it times out idle
	probe       probeEpoch // dispatched to probe a half-open circuit: which period; 0: not a probe

	contextVersion *int64 // the context snapshot attached at dispatch, if any
	contextTs      *int64
	progress       progressState // progress.go

	key []byte // id as a record key, made once and shared by its outputs (see keyBytes)
}

// keyBytes is p's id as a record key. Its outputs share it (a sink copies
// or keeps it, never changes it), so an intent's four or five outputs cost
// one conversion.
func (p *pending) keyBytes() []byte {
	if p.key == nil {
		p.key = []byte(p.id)
	}
	return p.key
}

// emitFunc hands an output to the sink; each non-nil track waits for its
// acknowledgement.
type emitFunc func(o *Output, a, b *track)

// engine is the router's state machine. It is owned by the event loop and
// never blocks: every effect is an Output handed to emit.
type engine struct {
	topics   config.Topics
	codec    *schemas.Codec
	routes   map[string]*route
	agents   map[string]*agentRoute
	unknown  *route
	pending  map[string]*pending
	wheel    *timeouts.Wheel[*pending]
	cache    *timeouts.FallbackCache
	resolved *resolvedWindow
	m        *metrics
	log      *slog.Logger
	emit     emitFunc
	failed   func(error)
	owns     func(partition int32) bool // whether this instance owns a requests partition
	contexts ContextLookup              // nil: none
	nowMs    int64                      // the time of the current tick, for the wheel's callback

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

	// scratch holds the records the engine encodes and forgets at once,
	// filled anew for each encode (the codec keeps no reference), so the
	// hot path allocates none of them.
	scratch struct {
		ar         schemas.AgentRequest
		pi         schemas.PendingIntent
		res        schemas.IntentResult
		resolvedAt int64
		outcome    string
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
		topics:   cfg.Topics,
		codec:    codec,
		routes:   map[string]*route{},
		agents:   map[string]*agentRoute{},
		pending:  map[string]*pending{},
		wheel:    wheel,
		cache:    timeouts.NewFallbackCache(cfg.Router.FallbackCacheSize),
		resolved: newResolvedWindow(cfg.Router.DedupWindow.D().Milliseconds(), nowMs),
		m:        m,
		log:      log,
		unknown:  &route{name: unknownType, m: m.forRoute(unknownType, "")},
		held:     map[int32][]*pending{},
		holdMax:  10_000,
		read:     map[int32]*readProgress{},
	}
	for name, a := range cfg.Agents {
		ar := newAgentRoute(name, a, m, nowMs)
		e.agents[name] = ar
		e.agentList = append(e.agentList, ar)
	}
	slices.SortFunc(e.agentList, func(a, b *agentRoute) int { return strings.Compare(a.name, b.name) })
	for name, it := range cfg.Intents {
		r := &route{
			name:   name,
			agent:  e.agents[it.Agent],
			policy: intents.TimeoutPolicy{Default: it.Timeout.D(), Min: it.MinTimeout.D(), Max: it.MaxTimeout.D()},
			retry:  newRetryPolicy(it.Retry),
			idleMs: it.IdleTimeout.D().Milliseconds(),
			m:      m.forRoute(name, it.Agent),

			progress: progressLimitsOf(it.Progress),
		}
		r.attachContext, r.contextMaxAge = it.Context == config.ContextAttach, it.ContextMaxAge.D()
		if it.InputSchema != nil {
			r.input = it.InputSchema.Schema
		}
		if fc := it.Fallback.Cache; fc != nil {
			r.cacheKey, r.cacheMaxAge = fc.Key, fc.MaxAge.D()
		}
		if it.Fallback.StaticJSON != "" {
			s := schemas.JSON(it.Fallback.StaticJSON)
			r.static = &s
		}
		e.routes[name] = r
	}
	return e, nil
}

// onRequest handles one record of the requests topic.
func (e *engine) onRequest(rec *Record, t *track, nowMs int64) {
	if control, ok := controlOf(rec); ok {
		e.onControl(rec, control, t, nowMs)
		return
	}
	var req schemas.IntentRequest
	if err := e.codec.Decode(rec.Value, &req); err != nil {
		e.unknown.m.received.Inc()
		e.reject(rec, t, schemas.ErrorClass(err), err, nil, nowMs)
		return
	}
	if err := intents.Validate(&req); err != nil {
		e.routeOf(req.IntentType).m.received.Inc()
		e.reject(rec, t, ClassInvalidIntent, err, &req, nowMs)
		return
	}
	r := e.routes[req.IntentType]
	if r == nil {
		e.unknown.m.received.Inc()
		e.reject(rec, t, ClassUnroutable, fmt.Errorf("no route for intent type %q: add it under intents in the configuration", req.IntentType), &req, nowMs)
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
			e.reject(rec, t, ClassUnroutable, fmt.Errorf("target_agent %q is not a configured agent", *req.TargetAgent), &req, nowMs)
			return
		}
	}
	if _, dup := e.pending[req.IntentID]; dup {
		e.m.dupIntents.Inc()
		return
	}
	if _, dup := e.resolved.get(req.IntentID); dup {
		e.m.dupIntents.Inc()
		return
	}
	if e.payloadFails(rec, t, r, &req, nowMs) {
		return
	}
	p := &pending{
		id:          req.IntentID,
		route:       r,
		agent:       agent,
		partition:   rec.Partition,
		cacheKey:    cacheKeyOf(r.cacheKey, &req),
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
	if p.deadline <= nowMs {
		e.timeOut(p, nowMs, schemas.ReasonExpiredOnArrival, t)
		return
	}
	e.admit(p, nowMs, t)
}

// dispatch sends an intent to its agent, records it in the pending
// changelog, and starts its timer. The caller has checked admission.
func (e *engine) dispatch(p *pending, nowMs int64, t *track) {
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
		Traceparent: p.traceparent,
	}
	e.attachContext(p, ar)
	var value []byte
	var err error
	if p.agent.json {
		value, err = e.codec.EncodeAs(schemas.EncodingJSON, p.agent.topic, ar)
	} else {
		value, err = e.codec.Encode(p.agent.topic, ar)
	}
	if err != nil {
		e.encodeFailed(t, err)
		e.unpersisted(p, nowMs, t)
		return
	}
	p.dispatched = nowMs
	p.phase, p.retryAt, p.idleAt = phaseInFlight, 0, 0
	if p.route.idleMs > 0 {
		p.idleAt = nowMs + p.route.idleMs
	}
	if !e.persist(p, t) {
		e.unpersisted(p, nowMs, t)
		return
	}
	e.emit(&Output{Topic: p.agent.topic, Key: p.keyBytes(), Value: value, Headers: p.headers()}, t, nil)
	a := p.agent
	a.inFlight++
	if a.rate > 0 {
		a.tokens--
	}
	if a.breaker != nil {
		p.probe = a.breaker.dispatched(nowMs)
	}
	e.pending[p.id] = p
	e.schedule(p)
	p.route.m.dispatched.Inc()
}

// persist writes p's state to the pending changelog.
func (e *engine) persist(p *pending, t *track) bool {
	p.recordInto(&e.scratch.pi)
	state, err := e.codec.Encode(e.topics.Pending, &e.scratch.pi)
	if err != nil {
		e.encodeFailed(t, err)
		return false
	}
	e.emit(&Output{Topic: e.topics.Pending, Key: p.keyBytes(), Value: state}, t, nil)
	p.persisted = true
	return true
}

// unpersisted resolves an intent whose agent request or pending state could
// not be encoded rejected (encode_failed), rather than leave it half
// admitted: in a phase its agent's counters do not account for, or pending
// without a timer.
func (e *engine) unpersisted(p *pending, nowMs int64, t *track) {
	p.phase = phaseNone
	e.resolve(p, schemas.OutcomeRejected, nil, &schemas.ErrorInfo{Code: ClassEncode, Message: "the intent could not be encoded for its agent or the pending changelog"}, 0, nowMs, t)
}

// schedule (re)starts p's timer at the next thing due: its retry, its idle
// deadline or its deadline.
func (e *engine) schedule(p *pending) {
	if p.timer != (timeouts.Timer{}) {
		e.wheel.Cancel(p.timer)
	}
	due := p.deadline
	switch {
	case p.phase == phaseRetry:
		due = p.retryAt
	case p.idleAt != 0:
		due = min(due, p.idleAt)
	}
	p.timer = e.wheel.Schedule(due, p)
}

// recordInto fills rec with p's durable form.
func (p *pending) recordInto(rec *schemas.PendingIntent) {
	*rec = schemas.PendingIntent{
		IntentID: p.id, IntentType: p.route.name, Agent: p.agent.name, RecordTs: p.recordTs,
		ReceivedAt: p.receivedAt, DispatchedAt: p.dispatched, Deadline: p.deadline, Attempt: p.attempt,
		CacheKey: p.cacheKey, Payload: p.payload, ContextRef: p.contextRef, SessionID: p.sessionID,
		Tenant: p.tenant, Traceparent: p.traceparent, ContextVersion: p.contextVersion, ContextTs: p.contextTs,
	}
	switch p.phase {
	case phaseQueued:
		rec.Queued = schemas.Ptr(true)
	case phaseRetry:
		rec.RetryAt = schemas.Ptr(p.retryAt)
	case phaseInFlight:
		if p.idleAt != 0 {
			rec.IdleDeadline = schemas.Ptr(p.idleAt)
		}
	}
	p.writeProgress(rec)
}

// resolvedRecord is the changelog's resolution marker for p: what the dedup
// window needs after a takeover (id, type, cache key, tenant, outcome), not
// the payload, context or phase a pending intent needs, so a resolution
// neither encodes nor writes the payload a third time.
// It is built in the engine's scratch record.
func (e *engine) resolvedRecord(p *pending, nowMs int64, outcome schemas.Outcome) *schemas.PendingIntent {
	sc := &e.scratch
	sc.resolvedAt, sc.outcome = nowMs, string(outcome)
	sc.pi = schemas.PendingIntent{
		IntentID: p.id, IntentType: p.route.name, Agent: p.agent.name, RecordTs: p.recordTs,
		ReceivedAt: p.receivedAt, DispatchedAt: p.dispatched, Deadline: p.deadline, Attempt: p.attempt,
		CacheKey: p.cacheKey, SessionID: p.sessionID, Tenant: p.tenant,
		ResolvedAt: &sc.resolvedAt, Outcome: &sc.outcome,
	}
	return &sc.pi
}

// onResponse handles one record of the responses topic.
func (e *engine) onResponse(rec *Record, t *track, nowMs int64) {
	var resp schemas.AgentResponse
	if err := e.codec.Decode(rec.Value, &resp); err != nil {
		e.deadLetter(rec, t, schemas.ErrorClass(err), err)
		return
	}
	if resp.RequestID == "" {
		e.deadLetter(rec, t, ClassInvalidResponse, errors.New(`field "request_id" is required`))
		return
	}
	defer e.readResponse(rec.Partition, rec.TimestampMs, nowMs)
	p := e.pendingFor(&resp)
	if p == nil {
		if resp.Status == schemas.StatusProgress {
			e.strayProgress(&resp)
		}
		e.onStrayResponse(&resp, nowMs, t)
		return
	}
	// An answer from any attempt answers the intent. An error or a progress
	// message counts only for the attempt in flight: one from an attempt
	// already retried (by its attempt field, or because no attempt is in
	// flight) is stale.
	current := p.phase == phaseInFlight && (resp.Attempt == nil || *resp.Attempt == p.attempt)
	switch resp.Status {
	case schemas.StatusOK:
		e.recordOutcome(p, false, nowMs)
		e.remember(p.route, p.cacheKey, resp.Answer, nowMs, t)
		e.resolve(p, schemas.OutcomeAnswered, resp.Answer, nil, rec.TimestampMs, nowMs, t)
	case schemas.StatusError:
		if !current {
			e.m.staleResponses.Inc()
			return
		}
		info := resp.Error
		if info == nil {
			info = &schemas.ErrorInfo{Code: "agent_error", Message: "the agent reported an error without details"}
		}
		e.recordOutcome(p, true, nowMs)
		e.onAgentError(p, info, rec.TimestampMs, nowMs, t)
	case schemas.StatusProgress:
		e.onProgress(p, &resp, current, t, nowMs)
	default:
		e.deadLetter(rec, t, ClassInvalidResponse, fmt.Errorf("status %q is not ok, error or progress", resp.Status))
	}
}

// onStrayResponse handles a response for an intent that is not pending: late
// (it timed out: the answer refreshes the fallback cache), duplicate (it was
// already answered: ignored) or unknown.
func (e *engine) onStrayResponse(resp *schemas.AgentResponse, nowMs int64, t *track) {
	done, ok := e.resolved.get(resp.RequestID)
	if !ok {
		e.m.unknownResp.Inc()
		e.log.Debug("response for an unknown intent", "intent_id", resp.RequestID, "agent", resp.Agent)
		return
	}
	if done.outcome == schemas.OutcomeAnswered || done.outcome == schemas.OutcomeAgentError {
		e.m.dupResponses.Inc()
		return
	}
	done.route.m.late.Inc()
	if resp.Status == schemas.StatusOK {
		e.remember(done.route, done.cacheKey, resp.Answer, nowMs, t)
	}
}

// remember puts a good answer in the fallback cache, here and, through the
// fallback-cache topic, in every instance.
func (e *engine) remember(r *route, key string, answer *schemas.JSON, nowMs int64, t *track) {
	if answer == nil || r.cacheKey == "" {
		return
	}
	e.cache.Put(r.name, key, string(*answer), nowMs)
	fa := &schemas.FallbackAnswer{IntentType: r.name, CacheKey: key, Answer: *answer, AnsweredAt: nowMs}
	value, err := e.codec.Encode(e.topics.FallbackCache, fa)
	if err != nil {
		e.encodeFailed(t, err)
		return
	}
	e.emit(&Output{Topic: e.topics.FallbackCache, Key: []byte(r.name + "/" + key), Value: value}, t, nil)
}

// onFallbackAnswer applies an answer read from the fallback-cache topic
// (written by any instance, this one included).
func (e *engine) onFallbackAnswer(fa *schemas.FallbackAnswer) {
	e.cache.Put(fa.IntentType, fa.CacheKey, string(fa.Answer), fa.AnsweredAt)
}

// tick advances the wheel and the dedup window to nowMs.
func (e *engine) tick(nowMs int64) {
	e.nowMs = nowMs
	e.wheel.Advance(nowMs, e.onExpire)
	e.pumpAll(nowMs)
	e.resolved.rotate(nowMs, func(gone map[string]resolvedEntry) {
		for id, r := range gone {
			if r.persisted && e.owns(r.partition) {
				e.emit(&Output{Topic: e.topics.Pending, Key: []byte(id)}, nil, nil) // tombstone
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

// readPast reports whether responses partition has been read past tsMs: to
// its end, or up to a record stamped after tsMs. A partition this instance
// has no record of (it owned it from the start and nothing came) counts as
// read.
func (e *engine) readPast(partition int32, tsMs int64) bool {
	rp := e.read[partition]
	return rp == nil || rp.atEnd || rp.maxTs > tsMs || (!rp.takenOver && e.nowMs-rp.lastReadAt >= quietMs)
}

func (e *engine) hold(p *pending, nowMs int64) {
	p.heldSince = nowMs
	e.held[p.partition] = append(e.held[p.partition], p)
}

// timeOut publishes the timeout event and resolves the intent with its
// fallback: the cache, else the static answer, else timed_out. An intent shed
// (its agent's queue was full) or refused by an open circuit resolves shed or
// circuit_open instead, with the fallback answer if any.
func (e *engine) timeOut(p *pending, nowMs int64, reason schemas.TimeoutReason, cause *track) {
	answer, outcome, kind := e.fallback(p, nowMs)
	switch reason {
	case schemas.ReasonShed:
		outcome = schemas.OutcomeShed
	case schemas.ReasonCircuitOpen:
		outcome = schemas.OutcomeCircuitOpen
	case schemas.ReasonDeadline, schemas.ReasonIdle:
		e.recordOutcome(p, true, nowMs) // a dispatched intent that timed out is a failure
	}
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
	e.emit(&Output{Topic: e.topics.Timeouts, Key: p.keyBytes(), Value: value, Headers: p.headers()}, cause, nil)
	if c := p.route.m.timeouts[reason]; c != nil {
		c.Inc()
	}
	e.resolve(p, outcome, answer, nil, 0, nowMs, cause)
}

// fallback is what an intent that gets no answer resolves with: the cache,
// else the static answer, else nothing (timed_out).
func (e *engine) fallback(p *pending, nowMs int64) (*schemas.JSON, schemas.Outcome, schemas.FallbackKind) {
	if p.route.cacheKey != "" {
		if a, _, ok := e.cache.Get(p.route.name, p.cacheKey, p.route.cacheMaxAge, nowMs); ok {
			j := schemas.JSON(a)
			return &j, schemas.OutcomeFallbackCache, schemas.FallbackCache
		}
	}
	if p.route.static != nil {
		return p.route.static, schemas.OutcomeFallbackStatic, schemas.FallbackStatic
	}
	return nil, schemas.OutcomeTimedOut, schemas.FallbackNone
}

// resolve writes the intent's one result, tombstones its pending state, and
// forgets it. cause is the record that resolved it (nil for a timer).
func (e *engine) resolve(p *pending, outcome schemas.Outcome, answer *schemas.JSON, errInfo *schemas.ErrorInfo, answeredAt, nowMs int64, cause *track) {
	if p.timer != (timeouts.Timer{}) {
		e.wheel.Cancel(p.timer)
		p.timer = timeouts.Timer{}
	}
	if p.agent != nil {
		e.leave(p)
	}
	delete(e.pending, p.id)
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
		res.Timeline.AnsweredAt = &answeredAt
	}
	res.Timeline.ContextVersion, res.Timeline.ContextTs = p.contextVersion, p.contextTs
	res.ProgressCount = p.progressCount()
	value, err := e.codec.Encode(e.topics.Results, res)
	if err != nil {
		e.encodeFailed(cause, err)
		return
	}
	key := p.keyBytes()
	e.emit(&Output{Topic: e.topics.Results, Key: key, Value: value, Headers: p.headers()}, cause, nil)
	// The changelog remembers the resolution for the dedup window, so that a
	// duplicate request is not dispatched again even after a takeover; the
	// window's rotation tombstones it.
	remember := p.agent != nil // rejected requests are not remembered
	if remember {
		state, err := e.codec.Encode(e.topics.Pending, e.resolvedRecord(p, nowMs, outcome))
		if err != nil {
			// The result is out: remember the resolution here at least, and
			// tombstone the pending record so that no takeover resurrects it.
			e.encodeFailed(cause, err)
			state, remember = nil, false
		}
		e.emit(&Output{Topic: e.topics.Pending, Key: key, Value: state}, cause, nil)
	}
	e.resolved.add(p.id, resolvedEntry{route: p.route, cacheKey: p.cacheKey, outcome: outcome, partition: p.partition, persisted: remember})
	p.route.m.resolved[outcome].Inc()
	if p.recordTs > 0 {
		p.route.m.seconds[outcome].Observe(float64(nowMs-p.recordTs) / 1000)
	}
}

// reject dead-letters a request and, when its id is readable, resolves it
// rejected so the caller hears why.
func (e *engine) reject(rec *Record, t *track, class string, cause error, req *schemas.IntentRequest, nowMs int64) {
	e.deadLetter(rec, t, class, cause)
	id := ""
	if req != nil && validID(req.IntentID) {
		id = req.IntentID
	} else if validID(string(rec.Key)) {
		id = string(rec.Key)
	}
	if id == "" {
		return
	}
	if _, dup := e.pending[id]; dup {
		return
	}
	r := e.unknown
	p := &pending{id: id, route: r, partition: rec.Partition, recordTs: rec.TimestampMs, receivedAt: nowMs}
	if req != nil {
		if known := e.routes[req.IntentType]; known != nil {
			p.route = known
		} else if intents.ValidName(req.IntentType) {
			p.route = &route{name: req.IntentType, m: r.m}
		}
		p.sessionID, p.tenant, p.traceparent = req.SessionID, req.Tenant, req.Traceparent
	}
	e.resolve(p, schemas.OutcomeRejected, nil, &schemas.ErrorInfo{Code: class, Message: cause.Error()}, 0, nowMs, t)
}

// readResponse notes that a response stamped tsMs was read from a partition,
// and times out the held intents whose deadline it shows passed unanswered.
func (e *engine) readResponse(partition int32, tsMs, nowMs int64) {
	rp := e.read[partition]
	if rp == nil {
		rp = &readProgress{}
		e.read[partition] = rp
	}
	rp.atEnd = false
	rp.maxTs = max(rp.maxTs, tsMs)
	rp.lastReadAt = nowMs
	if len(e.held[partition]) > 0 {
		e.releaseHeld(partition, func(p *pending) bool { return p.deadline < tsMs }, nowMs)
	}
}

// readToEnd notes that a responses partition has been read to its end: every
// held intent of it times out.
func (e *engine) readToEnd(partition int32, nowMs int64) {
	rp := e.read[partition]
	if rp == nil {
		rp = &readProgress{}
		e.read[partition] = rp
	}
	rp.atEnd = true
	rp.takenOver = false
	if len(e.held[partition]) > 0 {
		e.releaseHeld(partition, func(*pending) bool { return true }, nowMs)
	}
}

// takingOver notes that a partition was just assigned: its responses have not
// been read at all yet.
func (e *engine) takingOver(partition int32) {
	e.read[partition] = &readProgress{takenOver: true}
}

func (e *engine) releaseHeld(partition int32, due func(*pending) bool, nowMs int64) {
	keep := e.held[partition][:0]
	for _, p := range e.held[partition] {
		if e.pending[p.id] != p {
			continue // answered meanwhile
		}
		if !due(p) {
			keep = append(keep, p)
			continue
		}
		p.heldSince = 0
		e.timeOut(p, nowMs, schemas.ReasonDeadline, nil)
	}
	clear(e.held[partition][len(keep):])
	e.held[partition] = keep
}

// deadLetter copies a record to the dead-letter topic with where it came from
// and why.
func (e *engine) deadLetter(rec *Record, t *track, class string, cause error) {
	msg := cause.Error()
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	h := make([]Header, 0, len(rec.Headers)+5)
	h = append(h, rec.Headers...)
	h = append(h,
		Header{HeaderOriginalTopic, []byte(rec.Topic)},
		Header{HeaderOriginalPartition, strconv.AppendInt(nil, int64(rec.Partition), 10)},
		Header{HeaderOriginalOffset, strconv.AppendInt(nil, rec.Offset, 10)},
		Header{HeaderErrorClass, []byte(class)},
		Header{HeaderErrorMessage, []byte(msg)},
	)
	e.emit(&Output{Topic: e.topics.DeadLetter, Key: rec.Key, Value: rec.Value, Headers: h}, t, nil)
	e.m.deadLettered.WithLabelValues(rec.Topic, class).Inc()
	e.log.Warn("record dead-lettered", "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "class", class, "error", msg)
}

func (e *engine) encodeFailed(t *track, err error) {
	e.failed(fmt.Errorf("router: encoding an output: %w", err))
	if t != nil {
		t.failed = true
	}
}

// forgetPartition drops the pending intents of a revoked requests partition:
// their requests were not committed, so the partition's next owner replays
// them.
func (e *engine) forgetPartition(partition int32) int {
	n := 0
	for id, p := range e.pending {
		if p.partition == partition {
			if p.timer != (timeouts.Timer{}) {
				e.wheel.Cancel(p.timer)
			}
			e.leave(p)
			delete(e.pending, id)
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

func (p *pending) headers() []Header {
	if p.traceparent == nil {
		return nil
	}
	return []Header{{HeaderTraceparent, []byte(*p.traceparent)}}
}

func (p *pending) agentName() string {
	if p.agent == nil {
		return ""
	}
	return p.agent.name
}

// cacheKeyOf is the fallback-cache key of an intent: the field the intent
// type names, scoped to the intent's tenant, so that one tenant's answer is
// never another tenant's fallback.
func cacheKeyOf(key string, req *schemas.IntentRequest) string {
	var v *string
	switch key {
	case config.CacheKeyContextRef:
		v = req.ContextRef
	case config.CacheKeySessionID:
		v = req.SessionID
	case config.CacheKeyTenant:
		v = req.Tenant
	}
	k := ""
	if v != nil {
		k = *v
	}
	if key != config.CacheKeyTenant && req.Tenant != nil && *req.Tenant != "" {
		k = *req.Tenant + "/" + k
	}
	return k
}

func validID(s string) bool { return intents.ValidID(s) }
