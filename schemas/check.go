package schemas

import (
	"encoding/json"
	"fmt"
)

// What the Avro schemas cannot say, checked here for both encodings: payloads
// and answers hold JSON, and enum fields hold symbols of their enum.

// checkEncode reports whether r can be encoded: its JSON documents are
// well-formed (an empty payload means none) and its enums hold known symbols.
// Errors wrap ErrInvalidRecord.
func checkEncode(r Record) error { return checkRecord(r, true) }

// checkRecord is checkEncode, leaving the JSON documents out unless docs.
func checkRecord(r Record, docs bool) error {
	if !docs {
		return checkEnums(r)
	}
	switch v := r.(type) {
	case *IntentRequest:
		return checkDoc("payload", v.Payload)
	case *AgentRequest:
		return checkDoc("payload", v.Payload)
	case *AgentResponse:
		if !validStatus(v.Status) {
			return fmt.Errorf("%w: status %q is not a Status symbol", ErrInvalidRecord, v.Status)
		}
		if err := checkOptDoc("answer", v.Answer); err != nil {
			return err
		}
		return checkOptDoc("partial", v.Partial)
	case *IntentProgress:
		return checkOptDoc("partial", v.Partial)
	case *IntentTimeout:
		if !validReason(v.Reason) {
			return fmt.Errorf("%w: reason %q is not a TimeoutReason symbol", ErrInvalidRecord, v.Reason)
		}
		if !validFallback(v.Fallback) {
			return fmt.Errorf("%w: fallback %q is not a FallbackKind symbol", ErrInvalidRecord, v.Fallback)
		}
	case *IntentResult:
		if !validOutcome(v.Outcome) {
			return fmt.Errorf("%w: outcome %q is not an Outcome symbol", ErrInvalidRecord, v.Outcome)
		}
		return checkOptDoc("answer", v.Answer)
	case *PendingIntent:
		return checkDoc("payload", v.Payload)
	case *FallbackAnswer:
		return checkDoc("answer", v.Answer)
	}
	return nil
}

// checkEnums is checkEncode without the JSON documents: the enum fields.
func checkEnums(r Record) error {
	switch v := r.(type) {
	case *AgentResponse:
		if !validStatus(v.Status) {
			return fmt.Errorf("%w: status %q is not a Status symbol", ErrInvalidRecord, v.Status)
		}
	case *IntentTimeout:
		return checkRecord(r, true) // it holds no document
	case *IntentResult:
		if !validOutcome(v.Outcome) {
			return fmt.Errorf("%w: outcome %q is not an Outcome symbol", ErrInvalidRecord, v.Outcome)
		}
	}
	return nil
}

func checkDoc(field string, j JSON) error {
	if j != "" && !json.Valid([]byte(j)) {
		return fmt.Errorf("%w: %s is not a JSON document", ErrInvalidRecord, field)
	}
	return nil
}

func checkOptDoc(field string, j *JSON) error {
	if j == nil {
		return nil
	}
	return checkDoc(field, *j)
}

// checkAvroDocs reports whether the JSON documents of a record decoded from
// Avro (where they travel as strings) are well-formed, and turns an empty
// answer into an absent one, as JSON records have it. Errors wrap
// ErrInvalidPayload.
func checkAvroDocs(r Record) error {
	switch v := r.(type) {
	case *IntentRequest:
		return checkDecodedDoc("payload", v.Payload)
	case *AgentRequest:
		return checkDecodedDoc("payload", v.Payload)
	case *AgentResponse:
		if err := checkDecodedOptDoc("answer", &v.Answer); err != nil {
			return err
		}
		return checkDecodedOptDoc("partial", &v.Partial)
	case *IntentProgress:
		return checkDecodedOptDoc("partial", &v.Partial)
	case *IntentResult:
		return checkDecodedOptDoc("answer", &v.Answer)
	case *PendingIntent:
		return checkDecodedDoc("payload", v.Payload)
	case *FallbackAnswer:
		return checkDecodedDoc("answer", v.Answer)
	}
	return nil
}

func checkDecodedDoc(field string, j JSON) error {
	if j != "" && !json.Valid([]byte(j)) {
		return fmt.Errorf("%w: %s is not a JSON document", ErrInvalidPayload, field)
	}
	return nil
}

func checkDecodedOptDoc(field string, j **JSON) error {
	if *j == nil {
		return nil
	}
	if **j == "" {
		*j = nil
		return nil
	}
	return checkDecodedDoc(field, **j)
}

// normalizeEnums maps enum values a JSON record may carry but the schema does
// not know (a newer writer's symbol, or none at all) to the "unknown" symbol,
// which is what an Avro reader sees for a symbol it does not know.
func normalizeEnums(r Record) {
	switch v := r.(type) {
	case *AgentResponse:
		if !validStatus(v.Status) {
			v.Status = StatusUnknown
		}
	case *IntentTimeout:
		if !validReason(v.Reason) {
			v.Reason = ReasonUnknown
		}
		if !validFallback(v.Fallback) {
			v.Fallback = FallbackUnknown
		}
	case *IntentResult:
		if !validOutcome(v.Outcome) {
			v.Outcome = OutcomeUnknown
		}
	}
}

func validStatus(s Status) bool {
	switch s {
	case StatusOK, StatusError, StatusProgress, StatusUnknown:
		return true
	}
	return false
}

func validReason(s TimeoutReason) bool {
	switch s {
	case ReasonDeadline, ReasonIdle, ReasonExpiredOnArrival, ReasonCircuitOpen, ReasonShed, ReasonUnknown:
		return true
	}
	return false
}

func validFallback(s FallbackKind) bool {
	switch s {
	case FallbackNone, FallbackCache, FallbackStatic, FallbackUnknown:
		return true
	}
	return false
}

func validOutcome(s Outcome) bool {
	switch s {
	case OutcomeAnswered, OutcomeFallbackCache, OutcomeFallbackStatic, OutcomeTimedOut, OutcomeRejected,
		OutcomeAgentError, OutcomeCancelled, OutcomeShed, OutcomeCircuitOpen, OutcomeUnknown:
		return true
	}
	return false
}

// reset zeroes the record r points to, so decoding never merges into old
// values (a decoded map would otherwise keep stale keys). It reports false if
// r is a nil pointer.
func reset(r Record) bool {
	switch v := r.(type) {
	case *IntentRequest:
		if v == nil {
			return false
		}
		*v = IntentRequest{}
	case *AgentRequest:
		if v == nil {
			return false
		}
		*v = AgentRequest{}
	case *AgentResponse:
		if v == nil {
			return false
		}
		*v = AgentResponse{}
	case *IntentTimeout:
		if v == nil {
			return false
		}
		*v = IntentTimeout{}
	case *IntentResult:
		if v == nil {
			return false
		}
		*v = IntentResult{}
	case *ContextSnapshot:
		if v == nil {
			return false
		}
		*v = ContextSnapshot{}
	case *PendingIntent:
		if v == nil {
			return false
		}
		*v = PendingIntent{}
	case *FallbackAnswer:
		if v == nil {
			return false
		}
		*v = FallbackAnswer{}
	case *IntentProgress:
		if v == nil {
			return false
		}
		*v = IntentProgress{}
	default:
		return false
	}
	return true
}

// isNil reports whether r is nil or a nil pointer.
func isNil(r Record) bool {
	switch v := r.(type) {
	case *IntentRequest:
		return v == nil
	case *AgentRequest:
		return v == nil
	case *AgentResponse:
		return v == nil
	case *IntentTimeout:
		return v == nil
	case *IntentResult:
		return v == nil
	case *ContextSnapshot:
		return v == nil
	case *PendingIntent:
		return v == nil
	case *FallbackAnswer:
		return v == nil
	case *IntentProgress:
		return v == nil
	}
	return true
}
