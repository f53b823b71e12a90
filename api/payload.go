package api

import (
	"errors"
	"net/http"

	"github.com/switchboard-mcp/switchboard/intents/payload"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// Error code of a payload that fails its intent type's input_schema.
const codeInvalidPayload = "invalid_payload" // 422: the payload does not satisfy the intent type's input_schema

// CheckPayload checks an intent's payload against its intent type's
// input_schema, if the catalog holds the type and the type has one. It
// returns nil or a *payload.Error naming the failing path within the
// payload. Unknown types pass: the router rejects them (unroutable).
func (c Catalog) CheckPayload(intentType string, p schemas.JSON) error {
	t, ok := c.IntentType(intentType)
	if !ok || t.InputSchema == nil {
		return nil
	}
	return t.InputSchema.Validate([]byte(p))
}

// checkPayload answers 422 invalid_payload (and returns false) when req's
// payload fails its intent type's input_schema. The error's field is
// "payload" and its path the JSON Pointer of the failing value within the
// request body ("/payload/amount").
func (s *Server) checkPayload(w http.ResponseWriter, req *schemas.IntentRequest) bool {
	err := s.catalog.Load().CheckPayload(req.IntentType, req.Payload)
	if err == nil {
		return true
	}
	var pe *payload.Error
	path := "/payload"
	if errors.As(err, &pe) {
		path += pe.Path
	}
	writeJSON(w, http.StatusUnprocessableEntity, errorResponse{Error: errorBody{
		Code:    codeInvalidPayload,
		Message: "the payload does not satisfy the input_schema of intent type " + req.IntentType + ": " + err.Error(),
		Field:   "payload",
		Path:    path,
	}})
	return false
}
