package telemetry

import (
	"context"
	"fmt"
	"net/url"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/switchboard-mcp/switchboard/router/config"
)

// ServiceName is the service.name of every span Switchboard exports.
const ServiceName = "switchboard"

// Provider is a TracerProvider that exports over OTLP/HTTP. Shutdown
// flushes the spans still batched and stops the exporter; it is safe to
// call more than once.
type Provider struct {
	*sdktrace.TracerProvider
}

// Option adjusts the provider New builds.
type Option func(*options)

type options struct {
	component, instance string
	batch               []sdktrace.BatchSpanProcessorOption
}

// WithComponent names the part of Switchboard that exports (router, agent)
// and its instance, as the resource's switchboard.component and
// service.instance.id.
func WithComponent(component, instance string) Option {
	return func(o *options) { o.component, o.instance = component, instance }
}

// WithBatchOptions tunes the batching of spans before export (tests
// shorten its timeout).
func WithBatchOptions(opts ...sdktrace.BatchSpanProcessorOption) Option {
	return func(o *options) { o.batch = append(o.batch, opts...) }
}

// New builds the provider telemetry.traces asks for, or returns nil (and no
// error) when tracing is off. Spans are batched and exported in the
// background: a span's End never waits for the collector, and a collector
// that is down loses spans, not intents.
func New(cfg config.Traces, opts ...Option) (*Provider, error) {
	if !cfg.On() {
		return nil, nil
	}
	o := options{component: "router"}
	for _, opt := range opts {
		opt(&o)
	}
	endpoint, err := tracesURL(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrExporter, err)
	}
	attrs := []attribute.KeyValue{
		attribute.String("service.name", ServiceName),
		attribute.String("switchboard.component", o.component),
	}
	if o.instance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", o.instance))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, o.batch...),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.Ratio()))),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
	)
	return &Provider{tp}, nil
}

// tracesURL is the OTLP/HTTP URL spans are posted to: the endpoint's own
// path, else the standard /v1/traces.
func tracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("%w: %q is not a URL", ErrExporter, endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}
