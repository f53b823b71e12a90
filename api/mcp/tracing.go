package mcp

import (
	"context"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/router/telemetry"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// spanIntake is the MCP door's span of a tools/call that publishes an
// intent, from the call to its answer: the same name and shape as the HTTP
// API's (api/tracing.go), with switchboard.door "mcp". It continues the
// caller's trace (params._meta.traceparent, else the POST's Traceparent
// header), and the intent travels on with the intake span's traceparent,
// so the router's spans hang under it.
const spanIntake = "switchboard.intake"

// intake is a call's span; the zero value does nothing.
type intake struct {
	span trace.Span
	e    *Endpoint
}

// startIntake starts the intake span of ir at now and gives ir the span's
// traceparent when it is sampled. Without a tracer it only carries the
// caller's traceparent over to ir.
func (e *Endpoint) startIntake(req *sdk.CallToolRequest, ir *schemas.IntentRequest, now time.Time) intake {
	tp := callerTraceparent(req)
	if tp != "" {
		ir.Traceparent = &tp
	}
	if e.tracer == nil {
		return intake{}
	}
	parent := context.Background()
	if sc, ok := telemetry.Parse(tp); ok {
		parent = trace.ContextWithRemoteSpanContext(parent, sc)
	}
	_, span := e.tracer.Start(parent, spanIntake,
		trace.WithTimestamp(now), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("rpc.system", "jsonrpc"),
			attribute.String("rpc.method", "tools/call"),
			attribute.String("switchboard.door", "mcp"),
			attribute.String("switchboard.intent_id", ir.IntentID),
			attribute.String("switchboard.intent_type", ir.IntentType),
			attribute.String("switchboard.tenant", deref(ir.Tenant)),
		))
	if span.SpanContext().IsSampled() {
		s := telemetry.Format(span.SpanContext())
		ir.Traceparent = &s
	}
	return intake{span: span, e: e}
}

// end ends the intake span when the call answers.
func (in intake) end() {
	if in.span != nil {
		in.span.End(trace.WithTimestamp(in.e.cfg.Clock.Now()))
	}
}

// callerTraceparent is the call's W3C traceparent: params._meta.traceparent
// (how MCP clients propagate trace context), else the HTTP request's
// Traceparent header; "" when it has none.
func callerTraceparent(req *sdk.CallToolRequest) string {
	if req.Params != nil {
		if tp, ok := req.Params.Meta["traceparent"].(string); ok && tp != "" {
			return tp
		}
	}
	if req.Extra != nil && req.Extra.Header != nil {
		return req.Extra.Header.Get("Traceparent")
	}
	return ""
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
