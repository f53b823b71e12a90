package api

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/router/telemetry"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// spanIntake is the API's span of a submission: POST /v1/intents, from the
// request to its response. It continues the caller's trace (the body's
// traceparent, else the Traceparent header), and the intent travels on
// with the intake span's traceparent, so the router's spans hang under it.
const spanIntake = "switchboard.intake"

// apiTracing is the API's tracer and trace viewer link; its zero value
// traces nothing and links nowhere.
type apiTracing struct {
	tracer   trace.Tracer // nil: no spans
	traceURL string       // with {trace_id}; "": no link
}

// WithTracerProvider makes the API trace each submission with tp (a
// switchboard.intake span). Without it the API makes no span, and the
// caller's traceparent travels on as it came.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) {
		if tp != nil {
			o.tracing.tracer = tp.Tracer("github.com/switchboard-mcp/switchboard/api")
		}
	}
}

// WithTraceURL sets the trace viewer's page for one trace, with {trace_id}
// where the id goes (telemetry.trace_url): GET /v1/intents/{id} gives each
// traced intent's link as trace_url, and the console shows it.
func WithTraceURL(tmpl string) Option { return func(o *options) { o.tracing.traceURL = tmpl } }

// intake is a submission's span; the zero value does nothing.
type intake struct {
	span  trace.Span
	clock clockwork.Clock
}

// startIntake starts the intake span of req at nowMs (when the API took
// it) and gives req the span's traceparent when it is sampled.
func (s *Server) startIntake(r *http.Request, req *schemas.IntentRequest, nowMs int64) intake {
	if s.tracing.tracer == nil {
		return intake{}
	}
	parent := context.Background()
	if req.Traceparent != nil {
		if sc, ok := telemetry.Parse(*req.Traceparent); ok {
			parent = trace.ContextWithRemoteSpanContext(parent, sc)
		}
	}
	_, span := s.tracing.tracer.Start(parent, spanIntake,
		trace.WithTimestamp(time.UnixMilli(nowMs)), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("http.request.method", r.Method),
			attribute.String("url.path", r.URL.Path),
			attribute.String("switchboard.door", "api"),
			attribute.String("switchboard.intent_id", req.IntentID),
			attribute.String("switchboard.intent_type", req.IntentType),
			attribute.String("switchboard.tenant", deref(req.Tenant)),
		))
	if span.SpanContext().IsSampled() {
		tp := telemetry.Format(span.SpanContext())
		req.Traceparent = &tp
	}
	return intake{span: span, clock: s.clock}
}

// end ends the intake span when the response has been written.
func (in intake) end() {
	if in.span != nil {
		in.span.End(trace.WithTimestamp(in.clock.Now()))
	}
}

// traceLink is the trace viewer's URL for res's trace, or "".
func (t apiTracing) traceLink(res *schemas.IntentResult) string {
	if t.traceURL == "" || res == nil || res.Timeline.TraceID == nil {
		return ""
	}
	return strings.ReplaceAll(t.traceURL, "{trace_id}", *res.Timeline.TraceID)
}
