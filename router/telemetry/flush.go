package telemetry

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// FlushTimeout bounds how long a stopping process waits for the collector
// to take the spans still batched.
const FlushTimeout = 5 * time.Second

// OrNil is p as a trace.TracerProvider, or nil (not a nil *Provider in an interface) when
// tracing is off, so that every part given it makes no span.
func (p *Provider) OrNil() trace.TracerProvider {
	if p == nil {
		return nil
	}
	return p
}

// Flush exports the spans still batched, waiting at most FlushTimeout, and
// stops the exporter; a failure is logged. A nil p does nothing.
func (p *Provider) Flush(log *slog.Logger) {
	if p == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), FlushTimeout)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		log.Warn("exporting the last spans", "error", err)
	}
}
