package schemas

// The Go forms of the records in the .avsc files. Field tags carry both the Avro
// field name and the JSON name: they are the same, so an agent author reads one
// list of fields whichever encoding they use. Optional fields are pointers (an
// Avro union with null, omitted from JSON when nil).
//
// Timestamps and deadlines are unix milliseconds.

// IntentRequest asks that some agent do something. Key: IntentID.
type IntentRequest struct {
	IntentID    string  `avro:"intent_id" json:"intent_id"`
	IntentType  string  `avro:"intent_type" json:"intent_type"`
	TargetAgent *string `avro:"target_agent" json:"target_agent,omitempty"`
	ContextRef  *string `avro:"context_ref" json:"context_ref,omitempty"`
	TimeoutMs   *int64  `avro:"timeout_ms" json:"timeout_ms,omitempty"`
	Payload     JSON    `avro:"payload" json:"payload"`
	SessionID   *string `avro:"session_id" json:"session_id,omitempty"`
	Tenant      *string `avro:"tenant" json:"tenant,omitempty"`
	Traceparent *string `avro:"traceparent" json:"traceparent,omitempty"`
	CreatedAt   *int64  `avro:"created_at" json:"created_at,omitempty"`
}

// AgentRequest is an intent dispatched to an agent's topic. Key: IntentID.
type AgentRequest struct {
	IntentID    string           `avro:"intent_id" json:"intent_id"`
	IntentType  string           `avro:"intent_type" json:"intent_type"`
	Agent       string           `avro:"agent" json:"agent"`
	Payload     JSON             `avro:"payload" json:"payload"`
	ContextRef  *string          `avro:"context_ref" json:"context_ref,omitempty"`
	Context     *ContextSnapshot `avro:"context" json:"context,omitempty"`
	Deadline    int64            `avro:"deadline" json:"deadline"`
	Attempt     int32            `avro:"attempt" json:"attempt"`
	SessionID   *string          `avro:"session_id" json:"session_id,omitempty"`
	Tenant      *string          `avro:"tenant" json:"tenant,omitempty"`
	Traceparent *string          `avro:"traceparent" json:"traceparent,omitempty"`

	// ContextStatus says whether Context is fresh, stale or missing; nil
	// when the intent type does not attach context or the intent has no
	// context_ref.
	ContextStatus *ContextStatus `avro:"context_status" json:"context_status,omitempty"`
}

// Status is what an agent says of its response.
type Status string

// Status symbols. StatusUnknown is the Avro enum default: what an old reader
// sees when a newer writer uses a symbol it does not know.
const (
	StatusOK       Status = "ok"
	StatusError    Status = "error"
	StatusProgress Status = "progress"
	StatusUnknown  Status = "unknown"
)

// ErrorInfo describes a failure reported by an agent or by Switchboard.
type ErrorInfo struct {
	Code      string `avro:"code" json:"code"`
	Message   string `avro:"message" json:"message"`
	Retryable bool   `avro:"retryable" json:"retryable"`
}

// AgentResponse is an agent's answer to an AgentRequest. Key: RequestID (the
// intent id).
type AgentResponse struct {
	RequestID  string     `avro:"request_id" json:"request_id"`
	Agent      string     `avro:"agent" json:"agent"`
	Status     Status     `avro:"status" json:"status"`
	Answer     *JSON      `avro:"answer" json:"answer,omitempty"`
	Error      *ErrorInfo `avro:"error" json:"error,omitempty"`
	ProducedAt *int64     `avro:"produced_at" json:"produced_at,omitempty"`
	Attempt    *int32     `avro:"attempt" json:"attempt,omitempty"`

	// With status progress: what the agent is doing (Message), how far it
	// is (Progress of Total), a part of the answer (Partial, one JSON
	// document) and the agent's number for the message within its attempt
	// (Sequence, increasing; nil: not checked).
	Message  *string  `avro:"message" json:"message,omitempty"`
	Progress *float64 `avro:"progress" json:"progress,omitempty"`
	Total    *float64 `avro:"total" json:"total,omitempty"`
	Partial  *JSON    `avro:"partial" json:"partial,omitempty"`
	Sequence *int64   `avro:"sequence" json:"sequence,omitempty"`
}

// IntentProgress is one progress update of a pending intent, published by the
// router before the intent's result. Sequence runs 1, 2, 3, ... per intent.
// Key: IntentID.
type IntentProgress struct {
	IntentID   string   `avro:"intent_id" json:"intent_id"`
	IntentType string   `avro:"intent_type" json:"intent_type"`
	Agent      string   `avro:"agent" json:"agent"`
	Sequence   int64    `avro:"sequence" json:"sequence"`
	Attempt    int32    `avro:"attempt" json:"attempt"`
	Message    *string  `avro:"message" json:"message,omitempty"`
	Progress   *float64 `avro:"progress" json:"progress,omitempty"`
	Total      *float64 `avro:"total" json:"total,omitempty"`
	Partial    *JSON    `avro:"partial" json:"partial,omitempty"`
	SessionID  *string  `avro:"session_id" json:"session_id,omitempty"`
	Tenant     *string  `avro:"tenant" json:"tenant,omitempty"`
	ProducedAt *int64   `avro:"produced_at" json:"produced_at,omitempty"`
	ReceivedAt int64    `avro:"received_at" json:"received_at"`
}

// TimeoutReason says why an intent timed out.
type TimeoutReason string

// TimeoutReason symbols; ReasonUnknown is the Avro enum default.
const (
	ReasonDeadline         TimeoutReason = "deadline"
	ReasonIdle             TimeoutReason = "idle"
	ReasonExpiredOnArrival TimeoutReason = "expired_on_arrival"
	ReasonCircuitOpen      TimeoutReason = "circuit_open"
	ReasonShed             TimeoutReason = "shed"
	ReasonUnknown          TimeoutReason = "unknown"
)

// FallbackKind says which fallback resolved a timed-out intent.
type FallbackKind string

// FallbackKind symbols; FallbackUnknown is the Avro enum default.
const (
	FallbackNone    FallbackKind = "none"
	FallbackCache   FallbackKind = "cache"
	FallbackStatic  FallbackKind = "static"
	FallbackUnknown FallbackKind = "unknown"
)

// IntentTimeout is published when an intent's deadline passes before its
// agent answered. Key: IntentID.
type IntentTimeout struct {
	IntentID   string        `avro:"intent_id" json:"intent_id"`
	IntentType string        `avro:"intent_type" json:"intent_type"`
	Agent      string        `avro:"agent" json:"agent"`
	Deadline   int64         `avro:"deadline" json:"deadline"`
	TimedOutAt int64         `avro:"timed_out_at" json:"timed_out_at"`
	ElapsedMs  int64         `avro:"elapsed_ms" json:"elapsed_ms"`
	Reason     TimeoutReason `avro:"reason" json:"reason"`
	Fallback   FallbackKind  `avro:"fallback" json:"fallback"`
	Tenant     *string       `avro:"tenant" json:"tenant,omitempty"`
	SessionID  *string       `avro:"session_id" json:"session_id,omitempty"`
}

// Outcome is how an intent was resolved.
type Outcome string

// Outcome symbols; OutcomeUnknown is the Avro enum default.
const (
	OutcomeAnswered       Outcome = "answered"
	OutcomeFallbackCache  Outcome = "fallback_cache"
	OutcomeFallbackStatic Outcome = "fallback_static"
	OutcomeTimedOut       Outcome = "timed_out"
	OutcomeRejected       Outcome = "rejected"
	OutcomeAgentError     Outcome = "agent_error"
	OutcomeCancelled      Outcome = "cancelled"
	OutcomeShed           Outcome = "shed"
	OutcomeCircuitOpen    Outcome = "circuit_open"
	OutcomeUnknown        Outcome = "unknown"
)

// Timeline records when an intent passed each stage (unix ms).
type Timeline struct {
	ReceivedAt   int64  `avro:"received_at" json:"received_at"`
	DispatchedAt *int64 `avro:"dispatched_at" json:"dispatched_at,omitempty"`
	AnsweredAt   *int64 `avro:"answered_at" json:"answered_at,omitempty"`
	ResolvedAt   int64  `avro:"resolved_at" json:"resolved_at"`
	Deadline     int64  `avro:"deadline" json:"deadline"`

	// ContextVersion and ContextTs identify the context snapshot attached to
	// the AgentRequest (its version and snapshot_ts); nil if none was.
	ContextVersion *int64 `avro:"context_version" json:"context_version,omitempty"`
	ContextTs      *int64 `avro:"context_ts" json:"context_ts,omitempty"`
}

// IntentResult is the one result of an intent. Key: IntentID.
type IntentResult struct {
	IntentID   string     `avro:"intent_id" json:"intent_id"`
	IntentType string     `avro:"intent_type" json:"intent_type"`
	Agent      string     `avro:"agent" json:"agent"`
	Outcome    Outcome    `avro:"outcome" json:"outcome"`
	Answer     *JSON      `avro:"answer" json:"answer,omitempty"`
	Error      *ErrorInfo `avro:"error" json:"error,omitempty"`
	SessionID  *string    `avro:"session_id" json:"session_id,omitempty"`
	Tenant     *string    `avro:"tenant" json:"tenant,omitempty"`
	Attempts   int32      `avro:"attempts" json:"attempts"`
	Timeline   Timeline   `avro:"timeline" json:"timeline"`

	// ProgressCount is how many IntentProgress records were published for
	// the intent before this result (sequences 1 to ProgressCount); nil
	// when none.
	ProgressCount *int64 `avro:"progress_count" json:"progress_count,omitempty"`
}

// ContextSnapshot holds the features of one entity at one time. Key: EntityID.
type ContextSnapshot struct {
	EntityID    string             `avro:"entity_id" json:"entity_id"`
	SnapshotTs  int64              `avro:"snapshot_ts" json:"snapshot_ts"`
	Version     int64              `avro:"version" json:"version"`
	Features    map[string]float64 `avro:"features" json:"features"`
	SourceTopic *string            `avro:"source_topic" json:"source_topic,omitempty"`
}

// ContextStatus says how an intent's context snapshot stood when the router
// dispatched it. It travels as a string, so a reader meets values it does not
// know as they are: treat them as ContextMissing.
type ContextStatus string

// ContextStatus values.
const (
	ContextFresh   ContextStatus = "fresh"   // a snapshot within the max age is attached
	ContextStale   ContextStatus = "stale"   // an older snapshot is attached
	ContextMissing ContextStatus = "missing" // the router holds no snapshot for the entity
)

// Ptr returns a pointer to v: a convenience for optional fields.
func Ptr[T any](v T) *T { return &v }

// PendingIntent is the durable state of one intent in the compacted pending
// changelog, from its dispatch (ResolvedAt nil) through its resolution
// (ResolvedAt set) until a tombstone after the dedup window. Key: IntentID.
type PendingIntent struct {
	IntentID     string  `avro:"intent_id" json:"intent_id"`
	IntentType   string  `avro:"intent_type" json:"intent_type"`
	Agent        string  `avro:"agent" json:"agent"`
	RecordTs     int64   `avro:"record_ts" json:"record_ts"`
	ReceivedAt   int64   `avro:"received_at" json:"received_at"`
	DispatchedAt int64   `avro:"dispatched_at" json:"dispatched_at"`
	Deadline     int64   `avro:"deadline" json:"deadline"`
	Attempt      int32   `avro:"attempt" json:"attempt"`
	CacheKey     string  `avro:"cache_key" json:"cache_key"`
	Payload      JSON    `avro:"payload" json:"payload"`
	ContextRef   *string `avro:"context_ref" json:"context_ref,omitempty"`
	SessionID    *string `avro:"session_id" json:"session_id,omitempty"`
	Tenant       *string `avro:"tenant" json:"tenant,omitempty"`
	Traceparent  *string `avro:"traceparent" json:"traceparent,omitempty"`
	ResolvedAt   *int64  `avro:"resolved_at" json:"resolved_at,omitempty"`
	Outcome      *string `avro:"outcome" json:"outcome,omitempty"`
	Queued       *bool   `avro:"queued" json:"queued,omitempty"`
	RetryAt      *int64  `avro:"retry_at" json:"retry_at,omitempty"`
	IdleDeadline *int64  `avro:"idle_deadline" json:"idle_deadline,omitempty"`

	// ContextVersion and ContextTs identify the context snapshot attached at
	// dispatch, so a restored intent's result still names it.
	ContextVersion *int64 `avro:"context_version" json:"context_version,omitempty"`
	ContextTs      *int64 `avro:"context_ts" json:"context_ts,omitempty"`

	// The intent's progress so far: records published (the last
	// sequence), their bytes, the last agent sequence accepted for the
	// attempt in flight, and whether a cap was reached.
	ProgressSequence      *int64 `avro:"progress_sequence" json:"progress_sequence,omitempty"`
	ProgressBytes         *int64 `avro:"progress_bytes" json:"progress_bytes,omitempty"`
	ProgressAgentSequence *int64 `avro:"progress_agent_sequence" json:"progress_agent_sequence,omitempty"`
	ProgressCapped        *bool  `avro:"progress_capped" json:"progress_capped,omitempty"`
}

// FallbackAnswer is a last good answer in the compacted fallback-cache topic.
// Key: IntentType + "/" + CacheKey.
type FallbackAnswer struct {
	IntentType string `avro:"intent_type" json:"intent_type"`
	CacheKey   string `avro:"cache_key" json:"cache_key"`
	Answer     JSON   `avro:"answer" json:"answer"`
	AnsweredAt int64  `avro:"answered_at" json:"answered_at"`
}
