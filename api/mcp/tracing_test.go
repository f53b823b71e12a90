package mcp_test

import (
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/switchboard-mcp/switchboard/api/mcp"
	"github.com/switchboard-mcp/switchboard/router/telemetry"
)

const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
	callerTP    = "00-" + callerTrace + "-" + callerSpan + "-01"
)

// A tools/call has the HTTP API's trace shape: a switchboard.intake span
// (door mcp) under the caller's traceparent, from _meta or the header, and
// the intent is published with the intake span's, so the router's spans
// hang under it.
func TestToolsCallIntakeSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	h := newHarnessWith(t, nil, func(c *mcp.Config) { c.TracerProvider = tp })
	sid := h.session(keyAcme)
	calls := []struct {
		name, body string
		hdr        map[string]string
	}{
		{"_meta", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"n":1},"_meta":{"traceparent":"` + callerTP + `"}}}`, sessionHdr(sid)},
		{"header", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"n":2}}}`, sessionHdr(sid)},
	}
	calls[1].hdr = map[string]string{"Traceparent": callerTP}
	for k, v := range sessionHdr(sid) {
		calls[1].hdr[k] = v
	}
	for i, c := range calls {
		if r := h.post(keyAcme, c.hdr, c.body); !strings.Contains(r.body, `"outcome":"answered"`) {
			t.Fatalf("%s: %d %s", c.name, r.status, r.body)
		}
		spans := exp.GetSpans()
		if len(spans) != i+1 {
			t.Fatalf("%s: %d spans, want %d", c.name, len(spans), i+1)
		}
		in := spans[i]
		if in.Name != "switchboard.intake" || in.SpanKind.String() != "server" {
			t.Fatalf("%s: span %s (%s), want switchboard.intake (server)", c.name, in.Name, in.SpanKind)
		}
		if in.SpanContext.TraceID().String() != callerTrace || in.Parent.SpanID().String() != callerSpan {
			t.Errorf("%s: intake span in trace %s under %s, want the caller's", c.name, in.SpanContext.TraceID(), in.Parent.SpanID())
		}
		attrs := map[string]string{}
		for _, a := range in.Attributes {
			attrs[string(a.Key)] = a.Value.String()
		}
		reqs := h.pub.Requests()
		if len(reqs) != i+1 || reqs[i].Traceparent == nil {
			t.Fatalf("%s: published %+v", c.name, reqs)
		}
		if got, want := *reqs[i].Traceparent, telemetry.Format(in.SpanContext); got != want {
			t.Errorf("%s: published traceparent %s, want the intake span's %s", c.name, got, want)
		}
		if attrs["switchboard.door"] != "mcp" || attrs["switchboard.intent_id"] != reqs[i].IntentID || attrs["switchboard.intent_type"] != "echo" || attrs["switchboard.tenant"] != "acme" {
			t.Errorf("%s: attributes %v", c.name, attrs)
		}
		if !in.EndTime.Equal(h.clock.Now()) {
			t.Errorf("%s: intake span ended at %s, want the fake clock's %s", c.name, in.EndTime, h.clock.Now())
		}
	}
}

// Without a tracer the caller's traceparent is published as it came.
func TestToolsCallWithoutTracerCarriesTheCallersTraceparent(t *testing.T) {
	h := newHarness(t, nil)
	sid := h.session(keyAcme)
	r := h.post(keyAcme, sessionHdr(sid), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"traceparent":"`+callerTP+`"}}}`)
	if !strings.Contains(r.body, `"outcome":"answered"`) {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if reqs := h.pub.Requests(); len(reqs) != 1 || reqs[0].Traceparent == nil || *reqs[0].Traceparent != callerTP {
		t.Fatalf("published %+v", reqs)
	}
}
