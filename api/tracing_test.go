package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/router/telemetry"
	"github.com/switchboard-mcp/switchboard/schemas"
)

const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerTP    = "00-" + callerTrace + "-00f067aa0ba902b7-01"
)

// The API's intake span continues the caller's HTTP traceparent, and the
// intent is published with the intake span's, so the router's spans hang
// under it.
func TestIntakeSpanContinuesTheHTTPTraceparent(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	h := newHarness(t, withOption(api.WithTracerProvider(tp)))
	resp, body := h.post(`{"intent_type":"echo","payload":{}}`, map[string]string{"Traceparent": callerTP})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	reqs := h.pub.Requests()
	if len(reqs) != 1 || reqs[0].Traceparent == nil {
		t.Fatalf("published %+v", reqs)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Name != "switchboard.intake" {
		t.Fatalf("spans %v, want one switchboard.intake", spans)
	}
	in := spans[0]
	if in.SpanContext.TraceID().String() != callerTrace || in.Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("intake span in trace %s under %s, want the caller's", in.SpanContext.TraceID(), in.Parent.SpanID())
	}
	if got, want := *reqs[0].Traceparent, telemetry.Format(in.SpanContext); got != want {
		t.Errorf("published traceparent %s, want the intake span's %s", got, want)
	}
	if in.StartTime.UnixMilli() != h.clock.Now().UnixMilli() || !in.EndTime.Equal(h.clock.Now()) {
		t.Errorf("intake span %s..%s, want the fake clock's %s", in.StartTime, in.EndTime, h.clock.Now())
	}

	// No traceparent: the intake span starts the trace.
	if resp, body := h.post(`{"intent_type":"echo","payload":{}}`, nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	reqs = h.pub.Requests()
	if len(reqs) != 2 || telemetry.TraceID(reqs[1].Traceparent) != exp.GetSpans()[1].SpanContext.TraceID().String() {
		t.Errorf("a new trace: published traceparent %v", reqs[1].Traceparent)
	}
}

// Without a tracer the caller's traceparent is published as it came.
func TestNoTracerPublishesTheCallersTraceparent(t *testing.T) {
	h := newHarness(t)
	if resp, body := h.post(`{"intent_type":"echo","payload":{}}`, map[string]string{"Traceparent": callerTP}); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if reqs := h.pub.Requests(); len(reqs) != 1 || reqs[0].Traceparent == nil || *reqs[0].Traceparent != callerTP {
		t.Fatalf("published %+v", reqs)
	}
}

// GET /v1/intents/{id} links a traced intent to the trace viewer.
func TestIntentViewLinksTheTrace(t *testing.T) {
	h := newHarness(t, withOption(api.WithTraceURL("http://jaeger:16686/trace/{trace_id}")))
	res := result("t-1", "echo", "")
	res.Timeline.TraceID = schemas.Ptr(callerTrace)
	h.results.Add(res)
	h.results.Add(result("t-2", "echo", ""))
	for id, want := range map[string]string{"t-1": "http://jaeger:16686/trace/" + callerTrace, "t-2": ""} {
		resp, body := h.do("GET", "/v1/intents/"+id, "")
		var v struct {
			TraceURL string `json:"trace_url"`
			Timeline struct {
				TraceID string `json:"trace_id"`
			} `json:"timeline"`
		}
		if err := json.Unmarshal(body, &v); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", id, resp.StatusCode, body)
		}
		if v.TraceURL != want || (want != "" && v.Timeline.TraceID != callerTrace) {
			t.Errorf("%s: trace_url %q, trace_id %q; want %q", id, v.TraceURL, v.Timeline.TraceID, want)
		}
		if want == "" && strings.Contains(string(body), "trace_url") {
			t.Errorf("%s: a trace_url without a trace: %s", id, body)
		}
	}
}
