package client

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/router/telemetry"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// spanHandle is the agent runner's span for one request: the handler's
// work, a child of the router's dispatch span (the AgentRequest's
// traceparent). The handler's ctx carries it, so a handler's own spans
// nest under it.
const spanHandle = "switchboard.agent.handle"

// handling is the span of one request being served; its zero value (no
// tracer) does nothing.
type handling struct {
	a    *Agent
	span trace.Span
	tp   *string // the traceparent the response carries
}

// startHandling starts the span of req when the agent has a tracer, and
// returns the handler's context. Without a tracer the response carries the
// request's traceparent, so the router still joins it to the trace.
func (a *Agent) startHandling(ctx context.Context, req *schemas.AgentRequest) (context.Context, handling) {
	h := handling{a: a, tp: req.Traceparent}
	if a.tracer == nil {
		return ctx, h
	}
	parent := ctx
	if req.Traceparent != nil {
		if sc, ok := telemetry.Parse(*req.Traceparent); ok {
			parent = trace.ContextWithRemoteSpanContext(ctx, sc)
		}
	}
	ctx, h.span = a.tracer.Start(parent, spanHandle,
		trace.WithTimestamp(a.cfg.Clock.Now()), trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.destination.name", a.cfg.Topic),
			attribute.String("switchboard.intent_id", req.IntentID),
			attribute.String("switchboard.intent_type", req.IntentType),
			attribute.String("switchboard.agent", a.cfg.Name),
			attribute.Int("switchboard.attempt", int(req.Attempt)),
		))
	if h.span.SpanContext().IsSampled() {
		tp := telemetry.Format(h.span.SpanContext())
		h.tp = &tp
	}
	return ctx, h
}

// headers are the response's headers: its traceparent.
func (h handling) headers() []port.Header {
	if h.tp == nil {
		return nil
	}
	return []port.Header{{Key: port.HeaderTraceparent, Value: []byte(*h.tp)}}
}

// end ends the span with what the handler returned.
func (h handling) end(err error) {
	if h.span == nil {
		return
	}
	if err != nil {
		h.span.SetStatus(codes.Error, err.Error())
	}
	h.span.End(trace.WithTimestamp(h.a.cfg.Clock.Now()))
}

// traceID is the trace id of a request, for log lines ("" without one).
func traceID(req *schemas.AgentRequest) string { return telemetry.TraceID(req.Traceparent) }
