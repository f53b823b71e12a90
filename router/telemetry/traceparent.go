package telemetry

import (
	"go.opentelemetry.io/otel/trace"
)

// Parse reads a W3C traceparent (version 00: "00-<trace id>-<span id>-<flags>")
// into a remote span context; ok is false for anything else, so a caller's
// malformed header starts a new trace rather than failing the intent.
func Parse(tp string) (sc trace.SpanContext, ok bool) {
	if len(tp) != 55 || tp[0] != '0' || tp[1] != '0' || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return trace.SpanContext{}, false
	}
	tid, err := trace.TraceIDFromHex(tp[3:35])
	if err != nil {
		return trace.SpanContext{}, false
	}
	sid, err := trace.SpanIDFromHex(tp[36:52])
	if err != nil {
		return trace.SpanContext{}, false
	}
	var flags trace.TraceFlags
	switch tp[53:] {
	case "00":
	case "01":
		flags = trace.FlagsSampled
	default:
		return trace.SpanContext{}, false
	}
	sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true})
	return sc, sc.IsValid()
}

// Format writes sc as a W3C traceparent ("" for an invalid context).
func Format(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	flags := "00"
	if sc.IsSampled() {
		flags = "01"
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + flags
}

// TraceID is the trace id (32 hex digits) of a valid traceparent, or "".
// It does not allocate.
func TraceID(tp *string) string {
	if tp == nil {
		return ""
	}
	if _, ok := Parse(*tp); !ok {
		return ""
	}
	return (*tp)[3:35]
}
