package schemas

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// The router's hot path writes three records per intent step in JSON
// (AgentRequest, PendingIntent, IntentResult). encoding/json spends most of
// the event loop's time on them through reflection, a []byte copy of every
// JSON document and a second validation of it (BenchmarkEventLoop's
// profile). These appenders write the same bytes as encoding/json with
// SetEscapeHTML(false) (TestFastJSONMatchesEncodingJSON holds them to it),
// for the records as the router fills them; appendFastJSON reports false
// for what they do not cover (an attached context snapshot), which then
// goes through encoding/json.

// appendFastJSON appends r's JSON encoding to dst, if r is a record the
// appenders cover.
func appendFastJSON(dst []byte, r Record) ([]byte, bool) {
	switch v := r.(type) {
	case *AgentRequest:
		if v.Context != nil {
			return dst, false
		}
		return appendAgentRequest(dst, v), true
	case *PendingIntent:
		return appendPendingIntent(dst, v), true
	case *IntentResult:
		return appendIntentResult(dst, v), true
	}
	return dst, false
}

// fast reports whether r is of a type the appenders cover (one with an
// attached context snapshot still goes through encoding/json).
func fast(r Record) bool {
	switch r.(type) {
	case *AgentRequest, *PendingIntent, *IntentResult:
		return true
	}
	return false
}

// fastJSONSize is a capacity that holds r's JSON encoding in one
// allocation, usually: its documents and strings plus room for the rest.
func fastJSONSize(r Record) int {
	n := 256
	switch v := r.(type) {
	case *AgentRequest:
		n += len(v.Payload) + len(v.IntentID) + len(v.IntentType) + len(v.Agent)
	case *PendingIntent:
		n += len(v.Payload) + len(v.IntentID) + len(v.IntentType) + len(v.Agent) + len(v.CacheKey)
	case *IntentResult:
		n += len(v.IntentID) + len(v.IntentType) + len(v.Agent)
		if v.Answer != nil {
			n += len(*v.Answer)
		}
		if v.Error != nil {
			n += len(v.Error.Message)
		}
	}
	return n
}

func appendAgentRequest(b []byte, v *AgentRequest) []byte {
	b = append(b, `{"intent_id":`...)
	b = appendJSONString(b, v.IntentID)
	b = append(b, `,"intent_type":`...)
	b = appendJSONString(b, v.IntentType)
	b = append(b, `,"agent":`...)
	b = appendJSONString(b, v.Agent)
	b = append(b, `,"payload":`...)
	b = appendJSONDoc(b, v.Payload)
	b = appendOptString(b, `,"context_ref":`, v.ContextRef)
	b = append(b, `,"deadline":`...)
	b = strconv.AppendInt(b, v.Deadline, 10)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(v.Attempt), 10)
	b = appendOptString(b, `,"session_id":`, v.SessionID)
	b = appendOptString(b, `,"tenant":`, v.Tenant)
	b = appendOptString(b, `,"traceparent":`, v.Traceparent)
	if v.ContextStatus != nil {
		b = append(b, `,"context_status":`...)
		b = appendJSONString(b, string(*v.ContextStatus))
	}
	return append(b, '}')
}

func appendPendingIntent(b []byte, v *PendingIntent) []byte {
	b = append(b, `{"intent_id":`...)
	b = appendJSONString(b, v.IntentID)
	b = append(b, `,"intent_type":`...)
	b = appendJSONString(b, v.IntentType)
	b = append(b, `,"agent":`...)
	b = appendJSONString(b, v.Agent)
	b = append(b, `,"record_ts":`...)
	b = strconv.AppendInt(b, v.RecordTs, 10)
	b = append(b, `,"received_at":`...)
	b = strconv.AppendInt(b, v.ReceivedAt, 10)
	b = append(b, `,"dispatched_at":`...)
	b = strconv.AppendInt(b, v.DispatchedAt, 10)
	b = append(b, `,"deadline":`...)
	b = strconv.AppendInt(b, v.Deadline, 10)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(v.Attempt), 10)
	b = append(b, `,"cache_key":`...)
	b = appendJSONString(b, v.CacheKey)
	b = append(b, `,"payload":`...)
	b = appendJSONDoc(b, v.Payload)
	b = appendOptString(b, `,"context_ref":`, v.ContextRef)
	b = appendOptString(b, `,"session_id":`, v.SessionID)
	b = appendOptString(b, `,"tenant":`, v.Tenant)
	b = appendOptString(b, `,"traceparent":`, v.Traceparent)
	b = appendOptInt(b, `,"resolved_at":`, v.ResolvedAt)
	b = appendOptString(b, `,"outcome":`, v.Outcome)
	if v.Queued != nil {
		b = append(b, `,"queued":`...)
		b = strconv.AppendBool(b, *v.Queued)
	}
	b = appendOptInt(b, `,"retry_at":`, v.RetryAt)
	b = appendOptInt(b, `,"idle_deadline":`, v.IdleDeadline)
	b = appendOptInt(b, `,"context_version":`, v.ContextVersion)
	b = appendOptInt(b, `,"context_ts":`, v.ContextTs)
	b = appendOptInt(b, `,"progress_sequence":`, v.ProgressSequence)
	b = appendOptInt(b, `,"progress_bytes":`, v.ProgressBytes)
	b = appendOptInt(b, `,"progress_agent_sequence":`, v.ProgressAgentSequence)
	if v.ProgressCapped != nil {
		b = append(b, `,"progress_capped":`...)
		b = strconv.AppendBool(b, *v.ProgressCapped)
	}
	return append(b, '}')
}

func appendIntentResult(b []byte, v *IntentResult) []byte {
	b = append(b, `{"intent_id":`...)
	b = appendJSONString(b, v.IntentID)
	b = append(b, `,"intent_type":`...)
	b = appendJSONString(b, v.IntentType)
	b = append(b, `,"agent":`...)
	b = appendJSONString(b, v.Agent)
	b = append(b, `,"outcome":`...)
	b = appendJSONString(b, string(v.Outcome))
	if v.Answer != nil {
		b = append(b, `,"answer":`...)
		b = appendJSONDoc(b, *v.Answer)
	}
	if e := v.Error; e != nil {
		b = append(b, `,"error":{"code":`...)
		b = appendJSONString(b, e.Code)
		b = append(b, `,"message":`...)
		b = appendJSONString(b, e.Message)
		b = append(b, `,"retryable":`...)
		b = strconv.AppendBool(b, e.Retryable)
		b = append(b, '}')
	}
	b = appendOptString(b, `,"session_id":`, v.SessionID)
	b = appendOptString(b, `,"tenant":`, v.Tenant)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(v.Attempts), 10)
	t := &v.Timeline
	b = append(b, `,"timeline":{"received_at":`...)
	b = strconv.AppendInt(b, t.ReceivedAt, 10)
	b = appendOptInt(b, `,"dispatched_at":`, t.DispatchedAt)
	b = appendOptInt(b, `,"answered_at":`, t.AnsweredAt)
	b = append(b, `,"resolved_at":`...)
	b = strconv.AppendInt(b, t.ResolvedAt, 10)
	b = append(b, `,"deadline":`...)
	b = strconv.AppendInt(b, t.Deadline, 10)
	b = appendOptInt(b, `,"context_version":`, t.ContextVersion)
	b = appendOptInt(b, `,"context_ts":`, t.ContextTs)
	b = appendOptString(b, `,"trace_id":`, t.TraceID)
	b = append(b, '}')
	b = appendOptInt(b, `,"progress_count":`, v.ProgressCount)
	return append(b, '}')
}

func appendOptString(b []byte, key string, s *string) []byte {
	if s == nil {
		return b
	}
	b = append(b, key...)
	return appendJSONString(b, *s)
}

func appendOptInt(b []byte, key string, n *int64) []byte {
	if n == nil {
		return b
	}
	b = append(b, key...)
	return strconv.AppendInt(b, *n, 10)
}

// appendJSONDoc appends a JSON document as encoding/json writes a
// json.Marshaler's output: compacted ("" is null). The document was
// checked (checkEncode); one without whitespace is appended as it is.
func appendJSONDoc(b []byte, j JSON) []byte {
	if j == "" {
		return append(b, "null"...)
	}
	for i := 0; i < len(j); i++ {
		switch j[i] {
		case ' ', '\t', '\n', '\r':
			buf := bytes.NewBuffer(b)
			if json.Compact(buf, []byte(j)) != nil {
				return append(b, j...) // not reached: checked before
			}
			return buf.Bytes()
		}
	}
	return append(b, j...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string, escaped as encoding/json
// escapes it without HTML escaping: quotes, backslashes and control
// characters; invalid UTF-8 as U+FFFD; U+2028 and U+2029 as \u escapes.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
