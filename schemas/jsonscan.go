package schemas

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// The two records the router reads per intent (IntentRequest, AgentResponse)
// are decoded without reflection when they look the way producers write
// them: exact field names, strings without escapes, integers. Anything else
// (an unknown or differently cased field name, an escape, an error object, a
// number that is not an integer) returns false and goes through
// encoding/json, which then decides, so a record decodes to the same value
// either way (TestFastDecodeMatchesEncodingJSON).

// decodeFastJSON decodes data into r when r is a record it covers and data
// is on its fast path. data has been checked to be valid JSON.
func decodeFastJSON(data []byte, r Record) bool {
	switch r.(type) {
	case *IntentRequest, *AgentResponse:
	default:
		return false
	}
	s := jsonScan{data: data}
	if s.object(r) {
		return true
	}
	reset(r) // part decoded: encoding/json starts again
	return false
}

// field decodes the value of key into r.
func (s *jsonScan) field(r Record, key []byte) bool {
	switch v := r.(type) {
	case *IntentRequest:
		return intentRequestField(s, key, v)
	case *AgentResponse:
		return agentResponseField(s, key, v)
	}
	return false
}

func intentRequestField(s *jsonScan, key []byte, v *IntentRequest) bool {
	switch string(key) {
	case "intent_id":
		return s.str(&v.IntentID)
	case "intent_type":
		return s.str(&v.IntentType)
	case "target_agent":
		return s.optStr(&v.TargetAgent)
	case "context_ref":
		return s.optStr(&v.ContextRef)
	case "timeout_ms":
		return s.optInt(&v.TimeoutMs)
	case "payload":
		return s.doc(&v.Payload)
	case "session_id":
		return s.optStr(&v.SessionID)
	case "tenant":
		return s.optStr(&v.Tenant)
	case "traceparent":
		return s.optStr(&v.Traceparent)
	case "created_at":
		return s.optInt(&v.CreatedAt)
	}
	return false
}

func agentResponseField(s *jsonScan, key []byte, v *AgentResponse) bool {
	switch string(key) {
	case "request_id":
		return s.str(&v.RequestID)
	case "agent":
		return s.str(&v.Agent)
	case "status":
		return s.str((*string)(&v.Status))
	case "answer":
		return s.optDoc(&v.Answer)
	case "produced_at":
		return s.optInt(&v.ProducedAt)
	case "attempt":
		var n *int64
		if !s.optInt(&n) {
			return false
		}
		if n == nil {
			v.Attempt = nil
			return true
		}
		if int64(int32(*n)) != *n {
			return false
		}
		a := int32(*n)
		v.Attempt = &a
		return true
	}
	return false // "error" among them: encoding/json
}

// jsonScan reads valid JSON from data[i:].
type jsonScan struct {
	data []byte
	i    int
}

func (s *jsonScan) ws() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// object walks a top-level object, decoding each field into r, which holds
// its zero value.
func (s *jsonScan) object(r Record) bool {
	data := s.data
	s.ws()
	if s.i >= len(data) || data[s.i] != '{' {
		return false
	}
	s.i++
	s.ws()
	if s.i < len(data) && data[s.i] == '}' {
		s.i++
		return s.end()
	}
	for {
		key, ok := s.rawString()
		if !ok {
			return false
		}
		s.ws()
		s.i++ // ':'
		s.ws()
		if !s.field(r, key) {
			return false
		}
		s.ws()
		if s.i >= len(data) {
			return false
		}
		c := data[s.i]
		s.i++
		if c == '}' {
			return s.end()
		}
		s.ws() // after ','
	}
}

func (s *jsonScan) end() bool {
	s.ws()
	return s.i == len(s.data)
}

// rawString reads a string without escapes and returns its bytes.
func (s *jsonScan) rawString() ([]byte, bool) {
	if s.i >= len(s.data) || s.data[s.i] != '"' {
		return nil, false
	}
	start := s.i + 1
	ascii := true
	for j := start; j < len(s.data); j++ {
		switch c := s.data[j]; {
		case c == '"':
			s.i = j + 1
			b := s.data[start:j]
			if !ascii && !utf8.Valid(b) {
				return nil, false // encoding/json replaces invalid UTF-8
			}
			return b, true
		case c == '\\':
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

func (s *jsonScan) isNull() bool {
	if s.i+4 <= len(s.data) && string(s.data[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

func (s *jsonScan) str(dst *string) bool {
	if s.isNull() {
		return true // encoding/json leaves a string unchanged on null
	}
	b, ok := s.rawString()
	if !ok {
		return false
	}
	*dst = string(b)
	return true
}

func (s *jsonScan) optStr(dst **string) bool {
	if s.isNull() {
		*dst = nil
		return true
	}
	b, ok := s.rawString()
	if !ok {
		return false
	}
	v := string(b)
	*dst = &v
	return true
}

func (s *jsonScan) optInt(dst **int64) bool {
	if s.isNull() {
		*dst = nil
		return true
	}
	start := s.i
	for s.i < len(s.data) {
		c := s.data[s.i]
		if (c < '0' || c > '9') && c != '-' {
			break
		}
		s.i++
	}
	if s.i < len(s.data) {
		switch s.data[s.i] {
		case '.', 'e', 'E', '"':
			return false // a fraction, an exponent or a string: encoding/json
		}
	}
	n, err := strconv.ParseInt(string(s.data[start:s.i]), 10, 64)
	if err != nil {
		return false
	}
	*dst = &n
	return true
}

// doc reads any value as a JSON document, kept as written (null is "").
func (s *jsonScan) doc(dst *JSON) bool {
	if s.isNull() {
		*dst = ""
		return true
	}
	start := s.i
	if !s.skip() {
		return false
	}
	*dst = JSON(s.data[start:s.i])
	return true
}

func (s *jsonScan) optDoc(dst **JSON) bool {
	if s.isNull() {
		*dst = nil
		return true
	}
	var j JSON
	if !s.doc(&j) {
		return false
	}
	*dst = &j
	return true
}

// skip moves past one value of valid JSON.
func (s *jsonScan) skip() bool {
	depth := 0
	for s.i < len(s.data) {
		c := s.data[s.i]
		switch c {
		case '"':
			s.i++
			for s.i < len(s.data) && s.data[s.i] != '"' {
				if s.data[s.i] == '\\' {
					s.i++
				}
				s.i++
			}
			s.i++
		case '{', '[':
			depth++
			s.i++
		case '}', ']':
			if depth == 0 {
				return true // the end of the enclosing object
			}
			depth--
			s.i++
		case ',':
			if depth == 0 {
				return true
			}
			s.i++
		case ' ', '\t', '\n', '\r':
			if depth == 0 {
				return true
			}
			s.i++
		default:
			s.i++
		}
		if depth == 0 && (c == '"' || c == '}' || c == ']') {
			return true
		}
	}
	return depth == 0
}

// validJSON is json.Valid: the fast path needs a well-formed document.
var validJSON = json.Valid
