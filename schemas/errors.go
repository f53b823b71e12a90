package schemas

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors returned by this package wrap one of them; test with
// errors.Is.
var (
	// ErrEmpty means a record had no bytes at all (for example a tombstone).
	ErrEmpty = errors.New("schemas: empty record")

	// ErrUnknownFormat means a record is neither JSON (first byte '{', after
	// optional whitespace) nor in the Confluent wire format (magic byte 0).
	ErrUnknownFormat = errors.New("schemas: unknown record format")

	// ErrMalformed means a record's bytes do not follow its format: broken
	// JSON, JSON of the wrong shape, truncated or trailing Avro.
	ErrMalformed = errors.New("schemas: malformed record")

	// ErrTooLarge means a record is larger than the codec's limit
	// (WithMaxRecordBytes).
	ErrTooLarge = errors.New("schemas: record too large")

	// ErrInvalidPayload means a record decoded but a payload or answer in it is
	// not a JSON document.
	ErrInvalidPayload = errors.New("schemas: payload is not JSON")

	// ErrUnknownSchemaID means the Schema Registry has no schema with the id a
	// record carries.
	ErrUnknownSchemaID = errors.New("schemas: unknown schema id")

	// ErrIncompatibleSchema means a record's writer schema cannot be read as
	// the record type asked for (another record type, a non-Avro schema, or an
	// incompatible change).
	ErrIncompatibleSchema = errors.New("schemas: incompatible writer schema")

	// ErrNoRegistry means Avro was asked for, or an Avro record was read, but
	// the codec has no Schema Registry (WithRegistry).
	ErrNoRegistry = errors.New("schemas: no schema registry configured")

	// ErrRegistryUnavailable means the Schema Registry could not be reached or
	// failed (network error, timeout, 5xx, 429). It is transient: the same
	// record may decode once the registry is back.
	ErrRegistryUnavailable = errors.New("schemas: schema registry unavailable")

	// ErrInvalidRecord means a record cannot be encoded: a payload or answer
	// that is not JSON, or an enum field holding a symbol its enum lacks.
	ErrInvalidRecord = errors.New("schemas: invalid record")
)

// Classes of decoding failures, as ErrorClass returns them. They are stable
// strings, meant for dead-letter headers and metric labels.
const (
	ClassEmpty               = "empty"                // ErrEmpty
	ClassUnknownFormat       = "unknown_format"       // ErrUnknownFormat
	ClassMalformedJSON       = "malformed_json"       // ErrMalformed, JSON record
	ClassMalformedAvro       = "malformed_avro"       // ErrMalformed, Avro record
	ClassTooLarge            = "too_large"            // ErrTooLarge
	ClassInvalidPayload      = "invalid_payload"      // ErrInvalidPayload
	ClassUnknownSchema       = "unknown_schema"       // ErrUnknownSchemaID
	ClassIncompatibleSchema  = "incompatible_schema"  // ErrIncompatibleSchema
	ClassNoRegistry          = "no_registry"          // ErrNoRegistry
	ClassRegistryUnavailable = "registry_unavailable" // ErrRegistryUnavailable: transient
	ClassInvalidRecord       = "invalid_record"       // ErrInvalidRecord (encoding)
	ClassOther               = "other"                // anything else
)

// DecodeError is the error Codec.Decode returns. Class says what went wrong
// in a word (one of the Class constants); Err wraps the sentinel and details.
type DecodeError struct {
	Class string
	Err   error
}

func (e *DecodeError) Error() string { return e.Err.Error() }

func (e *DecodeError) Unwrap() error { return e.Err }

// decodeErr builds a DecodeError whose message starts with the sentinel.
func decodeErr(class string, sentinel error, format string, args ...any) *DecodeError {
	return &DecodeError{Class: class, Err: fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)}
}

// ErrorClass returns the class of err: the Class of a DecodeError in its
// chain, else the class of the sentinel it wraps, ClassOther for any other
// error, and "" for nil.
func ErrorClass(err error) string {
	if err == nil {
		return ""
	}
	if de, ok := errors.AsType[*DecodeError](err); ok {
		return de.Class
	}
	for _, c := range sentinelClasses {
		if errors.Is(err, c.err) {
			return c.class
		}
	}
	return ClassOther
}

// IsTransient reports whether err may go away if the same operation is tried
// again later (the Schema Registry was unavailable). A router should retry or
// pause rather than dead-letter such a record.
func IsTransient(err error) bool { return errors.Is(err, ErrRegistryUnavailable) }

var sentinelClasses = []struct {
	err   error
	class string
}{
	{ErrEmpty, ClassEmpty},
	{ErrUnknownFormat, ClassUnknownFormat},
	{ErrTooLarge, ClassTooLarge},
	{ErrInvalidPayload, ClassInvalidPayload},
	{ErrUnknownSchemaID, ClassUnknownSchema},
	{ErrIncompatibleSchema, ClassIncompatibleSchema},
	{ErrNoRegistry, ClassNoRegistry},
	{ErrRegistryUnavailable, ClassRegistryUnavailable},
	{ErrInvalidRecord, ClassInvalidRecord},
	// Decode wraps ErrMalformed in a DecodeError that says JSON or Avro;
	// an ErrMalformed outside one can only come from the Avro path.
	{ErrMalformed, ClassMalformedAvro},
}

// RegistryError is a Schema Registry reply other than success. It wraps
// ErrUnknownSchemaID (404 looking up an id), ErrRegistryUnavailable (5xx,
// 408, 429) or nothing (other 4xx, e.g. 409 incompatible schema, 401).
type RegistryError struct {
	Method     string // "GET" or "POST"
	Path       string // request path, e.g. "/schemas/ids/7"
	StatusCode int    // HTTP status
	Code       int    // the registry's error_code, 0 if none
	Message    string // the registry's message, or the start of the body
	kind       error  // sentinel, or nil
}

func (e *RegistryError) Error() string {
	s := fmt.Sprintf("schemas: schema registry %s %s: HTTP %d", e.Method, e.Path, e.StatusCode)
	if e.Code != 0 {
		s += fmt.Sprintf(" (error_code %d)", e.Code)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

func (e *RegistryError) Unwrap() error { return e.kind }
