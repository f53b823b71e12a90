package intents

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// Limits on the fields of an intent request. They keep one bad producer from
// filling the router's memory or the results topic with huge keys.
const (
	MaxIDLen        = 128
	MaxTypeLen      = 64
	MaxLabelLen     = 256 // session_id, tenant, context_ref, target_agent
	MaxTraceparent  = 55  // W3C traceparent version 00 is exactly 55 characters
	MaxTimeoutMs    = 24 * 60 * 60 * 1000
	MaxPayloadBytes = 1 << 20
)

// Validate checks an intent request and returns a *FieldError naming the first
// field at fault, or nil. It does not check that the intent type is routable:
// that depends on configuration and is the router's job.
func Validate(req *schemas.IntentRequest) error {
	if req == nil {
		return &FieldError{Field: "intent", Reason: "missing"}
	}
	if err := checkID("intent_id", req.IntentID, MaxIDLen); err != nil {
		return err
	}
	if err := checkType(req.IntentType); err != nil {
		return err
	}
	if req.Payload == "" {
		return &FieldError{Field: "payload", Reason: "required: a JSON document (use {} for none)"}
	}
	if len(req.Payload) > MaxPayloadBytes {
		return &FieldError{Field: "payload", Reason: fmt.Sprintf("%d bytes, more than the limit of %d", len(req.Payload), MaxPayloadBytes)}
	}
	if !json.Valid([]byte(req.Payload)) {
		return &FieldError{Field: "payload", Reason: "not a valid JSON document"}
	}
	if req.TimeoutMs != nil && (*req.TimeoutMs <= 0 || *req.TimeoutMs > MaxTimeoutMs) {
		return &FieldError{Field: "timeout_ms", Reason: fmt.Sprintf("%d is out of range: must be between 1 and %d", *req.TimeoutMs, MaxTimeoutMs)}
	}
	for _, f := range []struct {
		name string
		v    *string
		max  int
	}{
		{"target_agent", req.TargetAgent, MaxTypeLen},
		{"context_ref", req.ContextRef, MaxLabelLen},
		{"session_id", req.SessionID, MaxLabelLen},
		{"tenant", req.Tenant, MaxLabelLen},
		{"traceparent", req.Traceparent, MaxTraceparent},
	} {
		if f.v == nil {
			continue
		}
		if err := checkID(f.name, *f.v, f.max); err != nil {
			return err
		}
	}
	if req.CreatedAt != nil && *req.CreatedAt < 0 {
		return &FieldError{Field: "created_at", Reason: "must be unix milliseconds, not negative"}
	}
	return nil
}

// checkID accepts printable UTF-8 without spaces or control characters.
func checkID(field, v string, maxLen int) error {
	if v == "" {
		return &FieldError{Field: field, Reason: "required and must not be empty"}
	}
	if len(v) > maxLen {
		return &FieldError{Field: field, Reason: fmt.Sprintf("%d bytes, more than the limit of %d", len(v), maxLen)}
	}
	if !utf8.ValidString(v) {
		return &FieldError{Field: field, Reason: "not valid UTF-8"}
	}
	for _, r := range v {
		if r <= ' ' || r == 0x7f {
			return &FieldError{Field: field, Reason: "must not contain spaces or control characters"}
		}
	}
	return nil
}

// ValidID reports whether s can be an intent id: 1 to MaxIDLen bytes of
// printable UTF-8 without spaces.
func ValidID(s string) bool { return checkID("intent_id", s, MaxIDLen) == nil }

// ValidLabel reports whether s can be a tenant, session id or context ref: 1
// to MaxLabelLen bytes of printable UTF-8 without spaces.
func ValidLabel(s string) bool { return checkID("tenant", s, MaxLabelLen) == nil }

// checkType accepts lower-case names such as fraud_check or summarize.v2.
func checkType(v string) error {
	if v == "" {
		return &FieldError{Field: "intent_type", Reason: "required and must not be empty"}
	}
	if !ValidName(v) {
		return &FieldError{Field: "intent_type", Reason: fmt.Sprintf("%q is not a valid name: use 1 to %d of a-z, 0-9, '_', '-', '.', starting with a letter", v, MaxTypeLen)}
	}
	return nil
}

// ValidName reports whether s is a valid intent type or agent name: 1 to
// MaxTypeLen characters of a-z, 0-9, '_', '-', '.', starting with a letter.
func ValidName(s string) bool {
	if s == "" || len(s) > MaxTypeLen || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}
