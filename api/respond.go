package api

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// Error codes of the HTTP API and of stream error messages. They are stable:
// clients may switch on them.
const (
	codeInvalidIntent        = "invalid_intent"    // 400: a field of the intent request is invalid
	codeInvalidJSON          = "invalid_json"      // 400: the body is not one JSON object
	codeInvalidParameter     = "invalid_parameter" // 400: a query parameter is invalid
	codeBodyTooLarge         = "body_too_large"    // 413
	codeNotFound             = "not_found"         // 404: no such route, or no such result here
	codeMethodNotAllowed     = "method_not_allowed"
	codeUnavailable          = "unavailable" // 503: could not publish, or shutting down
	codeOverloaded           = "overloaded"  // 503: admission or the wait limit refused the intent before publishing it (admission.go, waiting.go)
	codeNotReady             = "not_ready"   // 503 from /readyz
	codeInternal             = "internal"    // 500
	codeForbiddenOrigin      = "forbidden_origin"
	codeBadHandshake         = "bad_handshake"
	codeBadMessage           = "bad_message"            // stream: a client message was not understood
	codeTooManySubscriptions = "too_many_subscriptions" // stream: Config.MaxSubscriptions reached
)

// errorBody is the error object of HTTP error responses and stream error
// messages.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	// Path is the JSON Pointer of the failing value within the request
	// body, when it is deeper than a field (invalid_payload).
	Path string `json:"path,omitempty"`
	// Reason and BacklogMs explain an overloaded refusal (admission.go):
	// which wait dominated, and the backlog counted, in milliseconds; or
	// reason "waiting" (waiting.go), without a backlog.
	Reason    string `json:"reason,omitempty"`
	BacklogMs *int64 `json:"backlog_ms,omitempty"`
}

type errorResponse struct {
	Error errorBody `json:"error"`
}

// accepted is the body of a 202: the intent was published; with ?wait,
// Status is "pending" (its result did not arrive in time).
type accepted struct {
	IntentID string `json:"intent_id"`
	Status   string `json:"status,omitempty"`
}

type statusBody struct {
	Status   string   `json:"status"`
	Degraded []string `json:"degraded,omitempty"` // /readyz: see WithDegradation
}

// writeJSON writes v as the JSON body with the given status. If v cannot be
// encoded, it answers 500 instead.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"the response could not be encoded"}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, code, message, field string) {
	writeJSON(w, status, errorResponse{Error: errorBody{Code: code, Message: message, Field: field}})
}

// marshal encodes v as JSON like json.Marshal, but without HTML escaping:
// stream messages are read by programs, so "<" in an error's text or an
// answer stays "<" rather than "\u003c".
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}
