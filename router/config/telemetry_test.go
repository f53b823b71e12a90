package config_test

import (
	"strings"
	"testing"
)

func TestTelemetryDefaultsOff(t *testing.T) {
	c, err := parse(t, "agents: {a: {}}\nintents: {e: {agent: a}}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Telemetry.Traces.On() {
		t.Error("traces on without an endpoint")
	}
	if r := c.Telemetry.Traces.Ratio(); r != 1 {
		t.Errorf("sample ratio %v, want 1 by default", r)
	}
	if l := c.Telemetry.TraceLink("4bf92f3577b34da6a3ce929d0e0e4736"); l != "" {
		t.Errorf("a trace link %q without trace_url", l)
	}
}

func TestTelemetryTraces(t *testing.T) {
	c, err := parse(t, `agents: {a: {}}
intents: {e: {agent: a}}
telemetry:
  traces: {endpoint: "http://collector:4318", sample_ratio: 0.25}
  trace_url: "http://jaeger:16686/trace/{trace_id}"
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := c.Telemetry.Traces
	if !tr.On() || tr.Endpoint != "http://collector:4318" || tr.Ratio() != 0.25 {
		t.Errorf("traces = %+v (ratio %v)", tr, tr.Ratio())
	}
	if l := c.Telemetry.TraceLink("abc"); l != "http://jaeger:16686/trace/abc" {
		t.Errorf("trace link %q", l)
	}
	zero, err := parse(t, "agents: {a: {}}\nintents: {e: {agent: a}}\ntelemetry: {traces: {endpoint: \"https://c\", sample_ratio: 0}}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := zero.Telemetry.Traces.Ratio(); r != 0 {
		t.Errorf("an explicit sample_ratio 0 reads as %v", r)
	}
}

func TestTelemetryErrorsNameFileLineAndKey(t *testing.T) {
	const head = "agents: {a: {}}\nintents: {e: {agent: a}}\ntelemetry:\n"
	for _, tc := range []struct{ yaml, want string }{
		{head + "  traces:\n    endpoint: collector:4318\n", `sb.yaml:5: telemetry.traces.endpoint: "collector:4318" is not an http or https URL with a host`},
		{head + "  traces:\n    endpoint: http://c:4318\n    sample_ratio: 1.5\n", `sb.yaml:6: telemetry.traces.sample_ratio: 1.5: must be from 0 to 1`},
		{head + "  traces:\n    sample_ratio: -0.1\n", `sb.yaml:5: telemetry.traces.sample_ratio: -0.1: must be from 0 to 1`},
		{head + "  trace_url: http://jaeger:16686/trace/\n", `sb.yaml:4: telemetry.trace_url: "http://jaeger:16686/trace/" has no {trace_id}`},
		{head + "  trace_url: jaeger/{trace_id}\n", `sb.yaml:4: telemetry.trace_url: "jaeger/{trace_id}" is not an http or https URL`},
		{head + "  traces:\n    endpoint: http://c:4318\n    sampling: 0.5\n", `sb.yaml:6: telemetry.traces.sampling`},
	} {
		_, err := parse(t, tc.yaml, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error:\n%v\nwant it to contain:\n%s", err, tc.want)
		}
	}
}
