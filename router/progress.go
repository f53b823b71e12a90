package router

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/router/telemetry"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// Progress: an agent's progress message (AgentResponse status progress) for
// the attempt in flight moves the intent's idle deadline (never its
// deadline) and, when it passes the checks below, is published as an
// IntentProgress record on topics.progress, keyed by the intent id, as an
// ordinary output of the response's event: in the same transaction as the
// response's offset under exactly_once, before the intent's result, in the
// order the agent sent them. Sequences are the router's, 1, 2, 3, ... per
// intent across attempts; the result's progress_count is the last one, so a
// reader of both topics knows how many to wait for. The intent's progress
// state is written to the pending changelog with each record, so a takeover
// continues the numbering and the caps where the last commit left them.
//
// A progress message is paired with its intent like an answer (pairing.go):
// by (tenant, request_id), and one from another agent than the intent's, for
// another tenant, or for an attempt never dispatched is dead-lettered
// (invalid_response) before any of the checks below.
//
// Dropped and counted (switchboard_progress_dropped_total{reason}), never
// published:
//
//   - unknown: no pending intent of that (tenant, id) on this instance;
//   - resolved: the intent is resolved (progress after the result);
//   - stale_attempt: not for the attempt in flight (an attempt already
//     retried, or none in flight);
//   - out_of_sequence: AgentResponse.sequence not above the last one accepted
//     for the attempt;
//   - capped: the intent reached its type's progress.max_per_intent or
//     progress.max_bytes (message + partial, in all); from then on every
//     progress of the intent is dropped, so a client sees a prefix without
//     holes. The result is never affected;
//   - encode_failed: the record could not be encoded (a registry outage):
//     progress is best effort and never fails the transaction.

// Reasons a progress message is dropped.
const (
	progressUnknown      = "unknown"
	progressResolved     = "resolved"
	progressStaleAttempt = "stale_attempt"
	progressOutOfSeq     = "out_of_sequence"
	progressCapped       = "capped"
	progressEncodeFailed = "encode_failed"
)

var progressDropReasons = []string{progressUnknown, progressResolved, progressStaleAttempt, progressOutOfSeq, progressCapped, progressEncodeFailed}

// progressLimits is an intent type's progress cap.
type progressLimits struct {
	maxPerIntent int64
	maxBytes     int64
}

func progressLimitsOf(p config.Progress) progressLimits {
	l := progressLimits{maxPerIntent: int64(p.MaxPerIntent), maxBytes: int64(p.MaxBytes)}
	if l.maxPerIntent <= 0 {
		l.maxPerIntent = config.DefaultProgressMaxPerIntent
	}
	if l.maxBytes <= 0 {
		l.maxBytes = config.DefaultProgressMaxBytes
	}
	return l
}

// progressState is what an intent has published so far.
type progressState struct {
	seq          int64 // records published: the last sequence
	bytes        int64 // their message and partial bytes
	agentSeq     int64 // the last AgentResponse.sequence accepted, for agentAttempt
	agentAttempt int32
	capped       bool
}

// progressMetrics are the progress series, resolved once.
type progressMetrics struct {
	published prometheus.Counter
	dropped   map[string]prometheus.Counter
}

func newProgressMetrics(reg prometheus.Registerer) (*progressMetrics, error) {
	published := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "switchboard_progress_published_total", Help: "IntentProgress records published on the progress topic.",
	})
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_progress_dropped_total",
		Help: "Agent progress messages not published, by reason: unknown, resolved, stale_attempt, out_of_sequence, capped, encode_failed.",
	}, []string{"reason"})
	for _, c := range []prometheus.Collector{published, dropped} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m := &progressMetrics{published: published, dropped: map[string]prometheus.Counter{}}
	for _, r := range progressDropReasons {
		m.dropped[r] = dropped.WithLabelValues(r)
	}
	return m, nil
}

// onProgress handles a progress message of a pending intent. current says
// whether it is for the attempt in flight.
func (e *engine) onProgress(p *pending, resp *schemas.AgentResponse, current bool, t *track, nowMs int64) {
	e.m.progress.Inc()
	if !current {
		e.progressDropped(progressStaleAttempt)
		return
	}
	changed := false
	if p.route.idleMs > 0 {
		// Progress pushes the idle deadline, never the deadline.
		p.idleAt = nowMs + p.route.idleMs
		changed = true
	}
	if e.publishProgress(p, resp, t, nowMs) {
		changed = true
	}
	if changed && e.persist(p, nowMs, t) {
		e.schedule(p)
	}
}

// publishProgress publishes resp as the intent's next IntentProgress unless a
// check drops it, and reports whether p's progress state changed.
func (e *engine) publishProgress(p *pending, resp *schemas.AgentResponse, t *track, nowMs int64) bool {
	st := &p.progress
	if resp.Sequence != nil {
		if st.agentAttempt == p.attempt && *resp.Sequence <= st.agentSeq {
			e.progressDropped(progressOutOfSeq)
			return false
		}
	}
	if st.capped {
		e.progressDropped(progressCapped)
		return false
	}
	size := int64(0)
	if resp.Message != nil {
		size += int64(len(*resp.Message))
	}
	if resp.Partial != nil {
		size += int64(len(*resp.Partial))
	}
	lim := p.route.progress
	if lim.maxPerIntent == 0 { // a restored intent of a type no longer configured
		lim = progressLimitsOf(config.Progress{})
	}
	if st.seq+1 > lim.maxPerIntent || st.bytes+size > lim.maxBytes {
		st.capped = true
		e.progressDropped(progressCapped)
		e.log.Debug("progress capped", "intent_id", p.id, "trace_id", telemetry.TraceID(p.traceparent), "intent_type", p.route.name, "published", st.seq, "bytes", st.bytes)
		return true
	}
	rec := &schemas.IntentProgress{
		IntentID:   p.id,
		IntentType: p.route.name,
		Agent:      p.agentName(),
		Sequence:   st.seq + 1,
		Attempt:    p.attempt,
		Message:    resp.Message,
		Progress:   resp.Progress,
		Total:      resp.Total,
		Partial:    resp.Partial,
		SessionID:  p.sessionID,
		Tenant:     p.tenant,
		ProducedAt: resp.ProducedAt,
		ReceivedAt: nowMs,
	}
	value, err := e.codec.Encode(e.topics.Progress, rec)
	if err != nil {
		e.progressDropped(progressEncodeFailed)
		e.log.Warn("progress not published: encoding failed", "intent_id", p.id, "trace_id", telemetry.TraceID(p.traceparent), "error", err)
		return false
	}
	e.emit(&port.Output{Topic: e.topics.Progress, Key: p.keyBytes(), Value: value, Headers: p.headers()}, t)
	st.seq++
	st.bytes += size
	if resp.Sequence != nil {
		st.agentSeq, st.agentAttempt = *resp.Sequence, p.attempt
	}
	e.m.prog.published.Inc()
	return true
}

// strayProgress counts a progress message for an intent that is not
// pending; key is the intent's (pairing.go).
func (e *engine) strayProgress(key string) {
	if _, ok := e.resolved.get(key); ok {
		e.progressDropped(progressResolved)
		return
	}
	e.progressDropped(progressUnknown)
}

func (e *engine) progressDropped(reason string) { e.m.prog.dropped[reason].Inc() }

// progressCount is the result's progress_count: nil when nothing was
// published.
func (p *pending) progressCount() *int64 {
	if p.progress.seq == 0 {
		return nil
	}
	n := p.progress.seq
	return &n
}

// writeProgress copies the progress state into p's changelog record.
func (p *pending) writeProgress(rec *schemas.PendingIntent) {
	st := p.progress
	if st.seq > 0 {
		rec.ProgressSequence, rec.ProgressBytes = schemas.Ptr(st.seq), schemas.Ptr(st.bytes)
	}
	if st.agentAttempt == p.attempt && st.agentSeq != 0 {
		rec.ProgressAgentSequence = schemas.Ptr(st.agentSeq)
	}
	if st.capped {
		rec.ProgressCapped = schemas.Ptr(true)
	}
}

// readProgress restores the progress state from a changelog record.
func (p *pending) readProgress(pi *schemas.PendingIntent) {
	st := &p.progress
	if pi.ProgressSequence != nil {
		st.seq = *pi.ProgressSequence
	}
	if pi.ProgressBytes != nil {
		st.bytes = *pi.ProgressBytes
	}
	if pi.ProgressAgentSequence != nil {
		st.agentSeq, st.agentAttempt = *pi.ProgressAgentSequence, pi.Attempt
	}
	st.capped = pi.ProgressCapped != nil && *pi.ProgressCapped
}
