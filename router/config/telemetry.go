package config

import (
	"fmt"
	"net/url"
	"strings"
)

// Telemetry is what Switchboard tells an observability backend besides its
// Prometheus metrics: OpenTelemetry traces of each intent, and where an
// operator looks one up (see the README's "Tracing").
type Telemetry struct {
	// Traces exports spans over OTLP/HTTP. Without an endpoint, tracing is
	// off: no span is made, and nothing is exported.
	Traces Traces `yaml:"traces"`
	// TraceURL is a trace viewer's page for one trace, with {trace_id}
	// where the trace id goes ("http://jaeger:16686/trace/{trace_id}"): the
	// console links each intent's trace there. Empty: no link.
	TraceURL string `yaml:"trace_url"`
}

// Traces is telemetry.traces.
type Traces struct {
	// Endpoint is the OTLP/HTTP collector's URL, e.g. http://collector:4318
	// (spans go to its /v1/traces unless the URL names another path).
	// Empty: tracing off (the default).
	Endpoint string `yaml:"endpoint"`
	// SampleRatio is the share of new traces recorded, from 0 to 1; an
	// intent that arrives with a traceparent follows its sampled flag.
	// Default 1 (every trace).
	SampleRatio *float64 `yaml:"sample_ratio"`
}

// DefaultSampleRatio is telemetry.traces.sample_ratio when it is absent.
const DefaultSampleRatio = 1.0

// TraceIDPlaceholder is what telemetry.trace_url replaces with a trace id.
const TraceIDPlaceholder = "{trace_id}"

// On reports whether traces are exported.
func (t Traces) On() bool { return t.Endpoint != "" }

// Ratio is the sample ratio, with its default.
func (t Traces) Ratio() float64 {
	if t.SampleRatio == nil {
		return DefaultSampleRatio
	}
	return *t.SampleRatio
}

// TraceLink is the trace viewer's URL for traceID, or "" without a
// trace_url or a trace id.
func (t Telemetry) TraceLink(traceID string) string {
	if t.TraceURL == "" || traceID == "" {
		return ""
	}
	return strings.ReplaceAll(t.TraceURL, TraceIDPlaceholder, traceID)
}

func (c *Config) validateTelemetry(add func(msg string, path ...string)) {
	t := c.Telemetry
	if t.Traces.Endpoint != "" {
		if msg := checkHTTPURL(t.Traces.Endpoint); msg != "" {
			add(msg, "telemetry", "traces", "endpoint")
		}
	}
	if r := t.Traces.SampleRatio; r != nil && !(*r >= 0 && *r <= 1) {
		add(fmt.Sprintf("%v: must be from 0 to 1", *r), "telemetry", "traces", "sample_ratio")
	}
	if t.TraceURL != "" {
		if msg := checkHTTPURL(t.TraceURL); msg != "" {
			add(msg, "telemetry", "trace_url")
		} else if !strings.Contains(t.TraceURL, TraceIDPlaceholder) {
			add(fmt.Sprintf("%q has no %s: write where the trace id goes, e.g. http://jaeger:16686/trace/%s", t.TraceURL, TraceIDPlaceholder, TraceIDPlaceholder), "telemetry", "trace_url")
		}
	}
}

// checkHTTPURL says what is wrong with an http(s) URL with a host, or "".
func checkHTTPURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("%q is not an http or https URL with a host", s)
	}
	return ""
}
