package router

import (
	"github.com/switchboard-mcp/switchboard/schemas"

	"github.com/switchboard-mcp/switchboard/router/port"
)

// ClassInvalidPayload is the dead-letter class (and the rejected result's
// error code) of an intent whose payload fails its intent type's
// input_schema.
const ClassInvalidPayload = "invalid_payload"

// payloadFails checks req's payload against its route's input schema. The
// API and the MCP endpoint check it before publishing; this catches intents
// written to the requests topic directly. A failing intent is rejected
// (dead-lettered, resolved rejected with the schema error) and
// payloadFails returns true.
func (e *engine) payloadFails(rec *port.Record, t *track, r *route, req *schemas.IntentRequest, nowMs int64) bool {
	if r.input == nil {
		return false
	}
	err := r.input.Validate([]byte(req.Payload))
	if err == nil {
		return false
	}
	e.reject(rec, t, ClassInvalidPayload, err, req, nowMs)
	return true
}
