package main

import "go.opentelemetry.io/otel/trace"

// tracerProvider is the node's provider, or nil when tracing is off.
func (n *node) tracerProvider() trace.TracerProvider { return n.traces.OrNil() }

// flushTraces exports the spans still batched and stops the exporter.
func (n *node) flushTraces() { n.traces.Flush(n.log) }
