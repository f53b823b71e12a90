package router

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/router/telemetry"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// The router's spans of one intent, all in the trace its traceparent names
// (the API's intake span, or the caller's), or in a new one:
//
//	switchboard.intent     from the IntentRequest's receipt to the result
//	├ switchboard.dispatch each attempt, from the AgentRequest to the agent's answer,
//	│ │                    error or timeout; its traceparent goes to the agent
//	│ └ (the agent's span: switchboard.agent.handle in intents/client)
//	│   └ switchboard.answer the agent's response, from when it was produced to when the router read it
//	├ switchboard.timeout  the deadline or idle timeout passed, with the fallback chosen
//	└ switchboard.resolve  the result published, with its outcome
//
// Spans take the event loop's clock for their times (the fake one in tests),
// and are ended in the loop without waiting: the provider batches and exports
// them elsewhere. Spans of intents handed over in a rebalance are dropped
// unended; the next owner continues the trace from the traceparent in the
// pending changelog.

// Span names.
const (
	spanIntent   = "switchboard.intent"
	spanDispatch = "switchboard.dispatch"
	spanAnswer   = "switchboard.answer"
	spanTimeout  = "switchboard.timeout"
	spanResolve  = "switchboard.resolve"
)

// intentTracer makes the router's spans. A nil *intentTracer is tracing off:
// every method returns at once, and the engine's only cost is the nil check.
type intentTracer struct {
	t trace.Tracer
}

// intentSpans are the open spans of one pending intent.
type intentSpans struct {
	intent  trace.Span // receipt to result
	attempt trace.Span // the attempt in flight; nil between attempts
}

func newIntentTracer(tp trace.TracerProvider) *intentTracer {
	if tp == nil {
		return nil
	}
	return &intentTracer{t: tp.Tracer("github.com/switchboard-mcp/switchboard/router")}
}

func at(ms int64) time.Time { return time.UnixMilli(ms) }

// parentOf is a context carrying p's traceparent as the remote parent, or
// the background context when it has none (a new trace).
func parentOf(tp *string) context.Context {
	if tp != nil {
		if sc, ok := telemetry.Parse(*tp); ok {
			return trace.ContextWithRemoteSpanContext(context.Background(), sc)
		}
	}
	return context.Background()
}

// received starts p's intent span. An intent that came with no traceparent
// gets the span's, when it is sampled, so that its records and its result
// carry the new trace.
func (tr *intentTracer) received(p *pending, rec *port.Record) {
	if tr == nil {
		return
	}
	tr.startIntent(p, rec.Topic)
	if p.traceparent == nil && p.spans.intent.SpanContext().IsSampled() {
		tp := telemetry.Format(p.spans.intent.SpanContext())
		p.traceparent = &tp
	}
}

func (tr *intentTracer) startIntent(p *pending, topic string) {
	p.spans = &intentSpans{}
	_, p.spans.intent = tr.t.Start(parentOf(p.traceparent), spanIntent,
		trace.WithTimestamp(at(p.receivedAt)), trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.destination.name", topic),
			attribute.String("switchboard.intent_id", p.id),
			attribute.String("switchboard.intent_type", p.route.name),
			attribute.String("switchboard.agent", p.agentName()),
			attribute.String("switchboard.tenant", deref(p.tenant)),
		))
}

// parent is the context the intent's other spans start in: its intent span,
// or (restored after a takeover, the intent span left with the previous
// owner) its traceparent.
func (s *intentSpans) parent(p *pending) context.Context {
	if s != nil && s.intent != nil {
		return trace.ContextWithSpan(context.Background(), s.intent)
	}
	return parentOf(p.traceparent)
}

// dispatched starts the span of p's attempt and returns the traceparent its
// AgentRequest carries: the attempt span's, or p's own when it is not
// recorded (tracing off, or not sampled).
func (tr *intentTracer) dispatched(p *pending, nowMs int64) *string {
	if tr == nil {
		return p.traceparent
	}
	if p.spans == nil {
		p.spans = &intentSpans{}
	}
	s := p.spans
	s.endAttempt(nowMs, codes.Unset, "")
	_, s.attempt = tr.t.Start(s.parent(p), spanDispatch,
		trace.WithTimestamp(at(nowMs)), trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.destination.name", p.agent.topic),
			attribute.String("switchboard.agent", p.agent.name),
			attribute.Int("switchboard.attempt", int(p.attempt)),
		))
	if !s.attempt.SpanContext().IsSampled() {
		return p.traceparent
	}
	tp := telemetry.Format(s.attempt.SpanContext())
	return &tp
}

func (s *intentSpans) endAttempt(nowMs int64, code codes.Code, why string) {
	if s == nil || s.attempt == nil {
		return
	}
	if code != codes.Unset {
		s.attempt.SetStatus(code, why)
	}
	s.attempt.End(trace.WithTimestamp(at(nowMs)))
	s.attempt = nil
}

// responded records the agent's answer or error for the attempt in flight
// (current): a span from when the agent produced it to when the router read
// it, a child of the agent's own span when the response carries its
// traceparent. Progress and stale responses make no span.
func (tr *intentTracer) responded(p *pending, resp *schemas.AgentResponse, rec *port.Record, current bool, nowMs int64) {
	if tr == nil || resp.Status == schemas.StatusProgress || (resp.Status == schemas.StatusError && !current) {
		return
	}
	ctx := p.spans.parent(p)
	if p.spans != nil && p.spans.attempt != nil {
		ctx = trace.ContextWithSpan(context.Background(), p.spans.attempt)
	}
	if sc, ok := traceparentOf(rec); ok && sc.TraceID() == trace.SpanContextFromContext(ctx).TraceID() {
		ctx = trace.ContextWithRemoteSpanContext(context.Background(), sc)
	}
	start := nowMs
	if resp.ProducedAt != nil && *resp.ProducedAt < nowMs {
		start = *resp.ProducedAt
	}
	_, span := tr.t.Start(ctx, spanAnswer, trace.WithTimestamp(at(start)), trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.destination.name", rec.Topic),
			attribute.String("switchboard.status", string(resp.Status)),
			attribute.String("switchboard.agent", resp.Agent),
		))
	code, why := codes.Ok, ""
	if resp.Status == schemas.StatusError {
		code = codes.Error
		if resp.Error != nil {
			why = resp.Error.Code + ": " + resp.Error.Message
		}
		span.SetStatus(code, why)
	}
	span.End(trace.WithTimestamp(at(nowMs)))
	p.spans.endAttempt(nowMs, code, why)
}

// timedOut records p's timeout and the fallback it resolves with.
func (tr *intentTracer) timedOut(p *pending, reason schemas.TimeoutReason, fallback schemas.FallbackKind, nowMs int64) {
	if tr == nil {
		return
	}
	_, span := tr.t.Start(p.spans.parent(p), spanTimeout, trace.WithTimestamp(at(nowMs)),
		trace.WithAttributes(
			attribute.String("switchboard.reason", string(reason)),
			attribute.String("switchboard.fallback", string(fallback)),
			attribute.Int64("switchboard.deadline", p.deadline),
		))
	span.End(trace.WithTimestamp(at(nowMs)))
	p.spans.endAttempt(nowMs, codes.Error, "timed out: "+string(reason))
}

// resolved records p's result and ends its spans. An intent with no intent
// span here (rejected, or restored after a takeover) gets one from its
// receipt.
func (tr *intentTracer) resolved(p *pending, outcome schemas.Outcome, nowMs int64) {
	if tr == nil {
		return
	}
	if p.spans == nil || p.spans.intent == nil {
		tr.startIntent(p, "")
	}
	s := p.spans
	s.endAttempt(nowMs, codes.Unset, "")
	_, span := tr.t.Start(s.parent(p), spanResolve, trace.WithTimestamp(at(nowMs)),
		trace.WithAttributes(attribute.String("switchboard.outcome", string(outcome)), attribute.Int("switchboard.attempts", int(p.attempt))))
	span.End(trace.WithTimestamp(at(nowMs)))
	s.intent.SetAttributes(attribute.String("switchboard.outcome", string(outcome)))
	if outcome != schemas.OutcomeAnswered {
		s.intent.SetStatus(codes.Error, string(outcome))
	}
	s.intent.End(trace.WithTimestamp(at(nowMs)))
	p.spans = nil
}

// traceIDOf is the timeline's trace_id: the trace id of p's traceparent.
// An intent without one costs nothing (the id escapes, so it is checked
// before it is declared).
func traceIDOf(p *pending) *string {
	if p.traceparent == nil {
		return nil
	}
	id := telemetry.TraceID(p.traceparent)
	if id == "" {
		return nil
	}
	return &id
}

// traceparentOf reads a record's traceparent header.
func traceparentOf(rec *port.Record) (trace.SpanContext, bool) {
	for _, h := range rec.Headers {
		if h.Key == port.HeaderTraceparent {
			return telemetry.Parse(string(h.Value))
		}
	}
	return trace.SpanContext{}, false
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// traceHeaders are the headers of a record that carries traceparent tp.
func traceHeaders(tp *string) []port.Header {
	if tp == nil {
		return nil
	}
	return []port.Header{{Key: port.HeaderTraceparent, Value: []byte(*tp)}}
}

// WithTracerProvider makes the router trace each intent (see tracing.go's
// span tree) with tp. Without it, or with nil, the router makes no span.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracer = tp }
}
