package intents

import "time"

// TimeoutPolicy is an intent type's timeout: the default when the intent does
// not ask for one, and the bounds that clamp what it asks for. Zero Min or Max
// means no bound.
type TimeoutPolicy struct {
	Default time.Duration
	Min     time.Duration
	Max     time.Duration
}

// Deadline returns an intent's absolute deadline in unix milliseconds: the
// request record's timestamp plus the intent's timeout_ms (or the policy's
// default), clamped to the policy's bounds. Because it starts from the record's
// timestamp, a backlog in front of the router never stretches a caller's
// deadline.
func Deadline(recordTsMs int64, timeoutMs *int64, p TimeoutPolicy) int64 {
	d := p.Default
	if timeoutMs != nil && *timeoutMs > 0 {
		d = time.Duration(*timeoutMs) * time.Millisecond
	}
	if p.Min > 0 && d < p.Min {
		d = p.Min
	}
	if p.Max > 0 && d > p.Max {
		d = p.Max
	}
	return recordTsMs + d.Milliseconds()
}
