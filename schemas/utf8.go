package schemas

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Text must be Unicode. encoding/json turns invalid UTF-8 in a string, and a
// \u escape of a lone surrogate, into U+FFFD, so that two different ids
// written to Kafka would read as the same id; Avro strings are not checked
// by the decoder at all. Records are refused instead (ErrMalformed).

// errNotUnicode is what CheckJSONText and checkStrings report.
var errNotUnicode = errors.New("not valid Unicode text")

// CheckJSONText reports whether JSON text is valid UTF-8 with no \u escape
// of a lone surrogate: whether decoding it keeps every string as written.
// It does not check the JSON syntax (the decoder does).
func CheckJSONText(data []byte) error {
	if !utf8.Valid(data) {
		return fmt.Errorf("%w: invalid UTF-8", errNotUnicode)
	}
	// Backslashes appear only in strings in well-formed JSON; in anything
	// else the decoder fails anyway, so no string state is tracked.
	for i := bytes.IndexByte(data, '\\'); i >= 0; {
		if i+1 >= len(data) {
			return nil
		}
		if data[i+1] != 'u' {
			i = next(data, i+2)
			continue
		}
		r, ok := hex4(data, i+2)
		if !ok {
			return nil // not an escape the decoder accepts: it reports it
		}
		switch {
		case r >= 0xdc00 && r <= 0xdfff:
			return fmt.Errorf("%w: a lone low surrogate \\u%04x", errNotUnicode, r)
		case r >= 0xd800 && r <= 0xdbff:
			lo, ok := uint16(0), false
			if i+7 < len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
				lo, ok = hex4(data, i+8)
			}
			if !ok || lo < 0xdc00 || lo > 0xdfff {
				return fmt.Errorf("%w: a lone high surrogate \\u%04x", errNotUnicode, r)
			}
			i = next(data, i+12)
		default:
			i = next(data, i+6)
		}
	}
	return nil
}

// next returns the index of the first backslash at or after from, or -1.
func next(data []byte, from int) int {
	if from >= len(data) {
		return -1
	}
	j := bytes.IndexByte(data[from:], '\\')
	if j < 0 {
		return -1
	}
	return from + j
}

// hex4 reads the four hex digits at data[at:].
func hex4(data []byte, at int) (uint16, bool) {
	if at+4 > len(data) {
		return 0, false
	}
	var v uint16
	for _, c := range data[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint16(c)
	}
	return v, true
}

// checkStrings reports whether every string of a record decoded from Avro
// is valid UTF-8 (JSON records are checked as text before decoding).
func checkStrings(r Record) error {
	var bad string
	check := func(field string, s string) {
		if bad == "" && !utf8.ValidString(s) {
			bad = field
		}
	}
	opt := func(field string, s *string) {
		if s != nil {
			check(field, *s)
		}
	}
	optJSON := func(field string, j *JSON) {
		if j != nil {
			check(field, string(*j))
		}
	}
	snapshot := func(prefix string, s *ContextSnapshot) {
		if s == nil {
			return
		}
		check(prefix+"entity_id", s.EntityID)
		opt(prefix+"tenant", s.Tenant)
		opt(prefix+"source_topic", s.SourceTopic)
		for k := range s.Features {
			check(prefix+"features", k)
		}
	}
	errInfo := func(e *ErrorInfo) {
		if e != nil {
			check("error.code", e.Code)
			check("error.message", e.Message)
		}
	}
	switch v := r.(type) {
	case *IntentRequest:
		check("intent_id", v.IntentID)
		check("intent_type", v.IntentType)
		opt("target_agent", v.TargetAgent)
		opt("context_ref", v.ContextRef)
		check("payload", string(v.Payload))
		opt("session_id", v.SessionID)
		opt("tenant", v.Tenant)
		opt("traceparent", v.Traceparent)
	case *AgentRequest:
		check("intent_id", v.IntentID)
		check("intent_type", v.IntentType)
		check("agent", v.Agent)
		check("payload", string(v.Payload))
		opt("context_ref", v.ContextRef)
		snapshot("context.", v.Context)
		opt("session_id", v.SessionID)
		opt("tenant", v.Tenant)
		opt("traceparent", v.Traceparent)
		if v.ContextStatus != nil {
			check("context_status", string(*v.ContextStatus))
		}
	case *AgentResponse:
		check("request_id", v.RequestID)
		check("agent", v.Agent)
		optJSON("answer", v.Answer)
		errInfo(v.Error)
		opt("tenant", v.Tenant)
	case *IntentTimeout:
		check("intent_id", v.IntentID)
		check("intent_type", v.IntentType)
		check("agent", v.Agent)
		opt("tenant", v.Tenant)
		opt("session_id", v.SessionID)
	case *IntentResult:
		check("intent_id", v.IntentID)
		check("intent_type", v.IntentType)
		check("agent", v.Agent)
		optJSON("answer", v.Answer)
		errInfo(v.Error)
		opt("session_id", v.SessionID)
		opt("tenant", v.Tenant)
	case *ContextSnapshot:
		snapshot("", v)
	case *PendingIntent:
		check("intent_id", v.IntentID)
		check("intent_type", v.IntentType)
		check("agent", v.Agent)
		check("cache_key", v.CacheKey)
		check("payload", string(v.Payload))
		opt("context_ref", v.ContextRef)
		opt("session_id", v.SessionID)
		opt("tenant", v.Tenant)
		opt("traceparent", v.Traceparent)
		opt("outcome", v.Outcome)
	case *FallbackAnswer:
		check("intent_type", v.IntentType)
		check("cache_key", v.CacheKey)
		check("answer", string(v.Answer))
	}
	if bad != "" {
		return fmt.Errorf("%w: field %s holds invalid UTF-8", errNotUnicode, bad)
	}
	return nil
}
