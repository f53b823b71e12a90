package main

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/router/telemetry"
)

// traceFlushTimeout bounds how long a stopping process waits for the
// collector to take the spans still batched.
const traceFlushTimeout = 5 * time.Second

// tracerProvider is the node's provider, or nil (not a nil *Provider in an
// interface) when tracing is off, so that every part makes no span.
func (n *node) tracerProvider() trace.TracerProvider { return providerOrNil(n.traces) }

func providerOrNil(p *telemetry.Provider) trace.TracerProvider {
	if p == nil {
		return nil
	}
	return p
}

// flushTraces exports the spans still batched and stops the exporter.
func (n *node) flushTraces() { shutdownTraces(n.traces, n.log) }

func shutdownTraces(p *telemetry.Provider, log *slog.Logger) {
	if p == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		log.Warn("exporting the last spans", "error", err)
	}
}
