package payload

import "errors"

var (
	// ErrInvalidSchema is wrapped by every error of [Compile]: the schema is
	// not JSON, not a JSON Schema, or refers to a document it may not load.
	ErrInvalidSchema = errors.New("payload: invalid schema")

	// ErrInvalidPayload is wrapped by every [Error] of [Schema.Validate]: the
	// payload does not satisfy the schema (or is not JSON).
	ErrInvalidPayload = errors.New("payload: does not match the schema")
)

// Error is why a payload failed its schema: the JSON Pointer (RFC 6901) of
// the first failing value ("" for the payload itself) and what is wrong
// with it. It wraps [ErrInvalidPayload].
type Error struct {
	Path   string
	Reason string
}

func (e *Error) Error() string {
	at := e.Path
	if at == "" {
		at = "/"
	}
	return "at " + at + ": " + e.Reason
}

// Unwrap lets errors.Is(err, ErrInvalidPayload) match.
func (e *Error) Unwrap() error { return ErrInvalidPayload }
