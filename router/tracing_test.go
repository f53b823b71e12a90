package router_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/router/telemetry"
	"github.com/switchboard-mcp/switchboard/schemas"
)

const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerTP    = "00-" + callerTrace + "-00f067aa0ba902b7-01"
	agentTP     = "00-" + callerTrace + "-1111111111111111-01"
)

// traced starts a router that exports its spans, as they end, to the
// returned exporter.
func traced(t *testing.T, delivery string, sampler sdktrace.Sampler) (*harness, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sampler))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	return start(t, testConfig, delivery, router.WithTracerProvider(tp)), exp
}

func spansByName(exp *tracetest.InMemoryExporter) map[string][]tracetest.SpanStub {
	m := map[string][]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		m[s.Name] = append(m[s.Name], s)
	}
	return m
}

func one(t *testing.T, m map[string][]tracetest.SpanStub, name string) tracetest.SpanStub {
	t.Helper()
	if len(m[name]) != 1 {
		t.Fatalf("%d spans %s, want 1 (spans: %v)", len(m[name]), name, m)
	}
	return m[name][0]
}

func attr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// An intent that arrives with a traceparent: the router's spans join the
// caller's trace, the agent is handed the dispatch span's traceparent, the
// answer hangs under the agent's span, and the result names the trace.
func TestTracingAnsweredIntentJoinsTheCallersTrace(t *testing.T) { both(t, testTracingAnswered) }

func testTracingAnswered(t *testing.T, delivery string) {
	h, exp := traced(t, delivery, sdktrace.AlwaysSample())
	h.request("i-1", "echo", `{}`, func(r *schemas.IntentRequest) { r.Traceparent = schemas.Ptr(callerTP) })
	out := h.wait(echoTopic, 1)
	var ar schemas.AgentRequest
	if err := h.codec.Decode(out.Value, &ar); err != nil {
		t.Fatal(err)
	}
	if ar.Traceparent == nil || telemetry.TraceID(ar.Traceparent) != callerTrace || *ar.Traceparent == callerTP {
		t.Fatalf("the AgentRequest carries traceparent %v, want the dispatch span's in trace %s", ar.Traceparent, callerTrace)
	}
	if len(out.Headers) != 1 || string(out.Headers[0].Value) != *ar.Traceparent {
		t.Fatalf("dispatch headers %v, want the traceparent %s", out.Headers, *ar.Traceparent)
	}

	h.advance(40 * time.Millisecond)
	produced := h.clock.Now().UnixMilli() - 10
	v, err := h.codec.Encode(responses, &schemas.AgentResponse{
		RequestID: "i-1", Agent: "echo", Status: schemas.StatusOK,
		Answer: schemas.Ptr(schemas.JSON(`{}`)), ProducedAt: &produced,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.src.Push(&port.Record{
		Topic: responses, Key: []byte("i-1"), Value: v, TimestampMs: h.clock.Now().UnixMilli(),
		Headers: []port.Header{{Key: port.HeaderTraceparent, Value: []byte(agentTP)}},
	})
	res := h.result(1)
	if res.Timeline.TraceID == nil || *res.Timeline.TraceID != callerTrace {
		t.Fatalf("timeline trace_id %v, want %s", res.Timeline.TraceID, callerTrace)
	}

	m := spansByName(exp)
	intent, dispatch := one(t, m, "switchboard.intent"), one(t, m, "switchboard.dispatch")
	answer, resolve := one(t, m, "switchboard.answer"), one(t, m, "switchboard.resolve")
	for _, s := range []tracetest.SpanStub{intent, dispatch, answer, resolve} {
		if s.SpanContext.TraceID().String() != callerTrace {
			t.Errorf("%s is in trace %s, want the caller's %s", s.Name, s.SpanContext.TraceID(), callerTrace)
		}
	}
	if intent.Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("intent's parent %s, want the caller's span", intent.Parent.SpanID())
	}
	if dispatch.Parent.SpanID() != intent.SpanContext.SpanID() || resolve.Parent.SpanID() != intent.SpanContext.SpanID() {
		t.Errorf("dispatch and resolve are not children of the intent span")
	}
	if "00-"+callerTrace+"-"+dispatch.SpanContext.SpanID().String()+"-01" != *ar.Traceparent {
		t.Errorf("the agent got %s, not the dispatch span %s", *ar.Traceparent, dispatch.SpanContext.SpanID())
	}
	if answer.Parent.SpanID().String() != "1111111111111111" {
		t.Errorf("answer's parent %s, want the agent's span from the response's header", answer.Parent.SpanID())
	}
	if got := answer.StartTime.UnixMilli(); got != produced {
		t.Errorf("answer starts at %d, want when the agent produced it, %d", got, produced)
	}
	if !dispatch.StartTime.Equal(t0) || !dispatch.EndTime.Equal(h.clock.Now()) || !intent.EndTime.Equal(h.clock.Now()) {
		t.Errorf("dispatch %s..%s, intent ends %s: want the fake clock's %s..%s", dispatch.StartTime, dispatch.EndTime, intent.EndTime, t0, h.clock.Now())
	}
	if attr(intent, "switchboard.intent_id") != "i-1" || attr(intent, "switchboard.outcome") != "answered" || attr(dispatch, "switchboard.attempt") != "1" {
		t.Errorf("attributes: intent %v, dispatch %v", intent.Attributes, dispatch.Attributes)
	}
}

// A timed-out intent: a timeout span with its fallback, the attempt ended
// in error, the result's outcome on the intent span.
func TestTracingTimeout(t *testing.T) {
	h, exp := traced(t, "exactly_once", sdktrace.AlwaysSample())
	h.request("i-1", "fraud_check", `{}`, func(r *schemas.IntentRequest) { r.Traceparent = schemas.Ptr(callerTP) })
	h.wait(slowTopic, 1)
	h.advance(400 * time.Millisecond)
	if res := h.result(1); res.Outcome != schemas.OutcomeFallbackStatic {
		t.Fatalf("outcome %s", res.Outcome)
	}
	m := spansByName(exp)
	to, dispatch, intent := one(t, m, "switchboard.timeout"), one(t, m, "switchboard.dispatch"), one(t, m, "switchboard.intent")
	if attr(to, "switchboard.reason") != "deadline" || attr(to, "switchboard.fallback") != "static" {
		t.Errorf("timeout attributes %v", to.Attributes)
	}
	if to.Parent.SpanID() != intent.SpanContext.SpanID() {
		t.Error("the timeout span is not the intent span's child")
	}
	if dispatch.Status.Code.String() != "Error" || intent.Status.Code.String() != "Error" || attr(intent, "switchboard.outcome") != "fallback_static" {
		t.Errorf("statuses: dispatch %v, intent %v %v", dispatch.Status, intent.Status, intent.Attributes)
	}
}

// Without a traceparent the router starts the trace, and the result names
// it; at sample ratio 0 it records nothing and names no trace.
func TestTracingStartsATraceWhenTheCallerHasNone(t *testing.T) {
	h, exp := traced(t, "at_least_once", sdktrace.ParentBased(sdktrace.AlwaysSample()))
	h.request("i-1", "echo", `{}`)
	var ar schemas.AgentRequest
	if err := h.codec.Decode(h.wait(echoTopic, 1).Value, &ar); err != nil {
		t.Fatal(err)
	}
	h.answer("i-1", "echo", `{}`)
	res := h.result(1)
	intent := one(t, spansByName(exp), "switchboard.intent")
	if intent.Parent.IsValid() || res.Timeline.TraceID == nil || *res.Timeline.TraceID != intent.SpanContext.TraceID().String() {
		t.Fatalf("intent span parent %v, trace %s; result's trace_id %v", intent.Parent, intent.SpanContext.TraceID(), res.Timeline.TraceID)
	}
	if telemetry.TraceID(ar.Traceparent) != intent.SpanContext.TraceID().String() {
		t.Errorf("the agent got traceparent %v outside the trace", ar.Traceparent)
	}

	h, exp = traced(t, "at_least_once", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0)))
	h.request("i-2", "echo", `{}`)
	if err := h.codec.Decode(h.wait(echoTopic, 1).Value, &ar); err != nil {
		t.Fatal(err)
	}
	h.answer("i-2", "echo", `{}`)
	if res := h.result(1); res.Timeline.TraceID != nil || ar.Traceparent != nil {
		t.Errorf("unsampled: result trace_id %v, agent traceparent %v; want none", res.Timeline.TraceID, ar.Traceparent)
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("%d spans recorded at sample ratio 0", n)
	}
}

// Tracing off: the caller's traceparent passes through as before, and the
// result still names the caller's trace.
func TestTracingOffPassesTheTraceparentThrough(t *testing.T) {
	h := start(t, testConfig, "at_least_once")
	h.request("i-1", "echo", `{}`, func(r *schemas.IntentRequest) { r.Traceparent = schemas.Ptr(callerTP) })
	var ar schemas.AgentRequest
	if err := h.codec.Decode(h.wait(echoTopic, 1).Value, &ar); err != nil {
		t.Fatal(err)
	}
	if ar.Traceparent == nil || *ar.Traceparent != callerTP {
		t.Fatalf("traceparent %v, want the caller's", ar.Traceparent)
	}
	h.answer("i-1", "echo", `{}`)
	if res := h.result(1); res.Timeline.TraceID == nil || *res.Timeline.TraceID != callerTrace {
		t.Fatalf("trace_id %v", res.Timeline.TraceID)
	}
}

// Log lines about an intent name its trace.
func TestLogLinesAboutAnIntentNameItsTrace(t *testing.T) {
	var buf lockedBuffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	h := start(t, testConfig, config.AtLeastOnce, router.WithLogger(log))
	acme := "acme"
	h.request("t-1", "echo", `{}`, func(r *schemas.IntentRequest) { r.Tenant, r.Traceparent = &acme, schemas.Ptr(callerTP) })
	h.wait(echoTopic, 1)
	h.cancelRecord("t-1", []byte(`{"intent_id":"t-1","tenant":"globex"}`))
	h.settle()
	if out := buf.String(); !strings.Contains(out, `"msg":"cancel refused: the intent belongs to another tenant","intent_id":"t-1","trace_id":"`+callerTrace+`"`) {
		t.Fatalf("log:\n%s\nwant the refused cancel's line with the trace id", out)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
