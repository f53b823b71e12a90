package intents

import (
	"errors"
	"fmt"
)

// ErrInvalid is wrapped by every validation error, so callers can test for it
// with errors.Is whatever field was at fault.
var ErrInvalid = errors.New("intents: invalid intent")

// FieldError says which field of an intent request is invalid and why.
type FieldError struct {
	Field  string // the field's wire name, e.g. "intent_type"
	Reason string // what is wrong, in words a person can act on
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("intents: invalid intent: field %q: %s", e.Field, e.Reason)
}

// Unwrap lets errors.Is(err, ErrInvalid) match.
func (e *FieldError) Unwrap() error { return ErrInvalid }
