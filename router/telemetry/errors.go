package telemetry

import "errors"

// ErrExporter means the OTLP exporter could not be built from
// telemetry.traces (its endpoint).
var ErrExporter = errors.New("telemetry: OTLP trace exporter")
