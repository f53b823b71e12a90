// Package telemetry owns Switchboard's OpenTelemetry tracing setup: the
// TracerProvider built from telemetry.traces (an OTLP/HTTP exporter, a
// parent-based ratio sampler, the service's resource), and the W3C
// traceparent helpers the router, the API and the agent runner share to
// join their spans into one trace per intent (Parse, Format, TraceID).
//
// It does not make spans about intents: the router (router/tracing.go), the
// API (api/tracing.go) and the Go agent runner (intents/client) do, each
// with the provider it is given. Without telemetry.traces.endpoint there is
// no provider (New returns nil) and those callers make no span at all.
package telemetry
