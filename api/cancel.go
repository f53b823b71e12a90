package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// Canceller publishes a cancel record (see [intents.Cancel]) to the requests
// topic: key the intent id, header switchboard.control=cancel. PublishCancel
// returns once the broker has acknowledged the record, or with an error. It
// must be safe for concurrent use and honour ctx.
type Canceller interface {
	PublishCancel(ctx context.Context, c intents.Cancel) error
}

// MaxCancelReason caps the reason of DELETE /v1/intents/{id}, in bytes.
const MaxCancelReason = 1024

// Error codes of DELETE /v1/intents/{id} (see respond.go for the others).
const (
	codeAlreadyResolved = "already_resolved" // 409: the intent has its result; nothing to cancel
)

// cancelRequested is the body of the 202 of DELETE /v1/intents/{id}.
type cancelRequested struct {
	IntentID string `json:"intent_id"`
	Status   string `json:"status"` // always "cancel_requested"
}

// resolvedError is the body of the 409 of DELETE /v1/intents/{id}: the
// error object says how the intent resolved.
type resolvedError struct {
	Error struct {
		errorBody
		Outcome schemas.Outcome `json:"outcome"`
	} `json:"error"`
}

// cancelBody is the optional JSON body of DELETE /v1/intents/{id}.
type cancelBody struct {
	Reason string `json:"reason"`
}

// cancelIntent serves DELETE /v1/intents/{id}[?reason=TEXT]: it publishes a
// cancel record and answers 202; the router resolves the intent `cancelled`
// if it is still pending when the record arrives, and ignores it otherwise.
// An intent whose result this instance holds gets 409 already_resolved.
func (s *Server) cancelIntent(w http.ResponseWriter, r *http.Request) {
	id, ok := intentIDParam(w, r)
	if !ok {
		return
	}
	reason, ok := s.cancelReason(w, r)
	if !ok {
		return
	}
	// Only the caller's tenant's intent counts (the tenant-less one with
	// authentication off, as the cancel record says), resolved on any
	// instance: this one's memory or the lookup store. Another tenant's
	// resolved intent with this id is answered as an unknown one (202: the
	// record goes out with the caller's tenant and the router ignores it),
	// so that its existence is not revealed.
	tenant := deref(tenantPtr(principalFrom(r.Context())))
	if st, err := s.lookup.Lookup(r.Context(), tenant, id); err == nil && st.Resolved() {
		res := st.Result
		var body resolvedError
		body.Error.errorBody = errorBody{
			Code:    codeAlreadyResolved,
			Message: fmt.Sprintf("intent %q has already resolved (%s): there is nothing to cancel", id, res.Outcome),
		}
		body.Error.Outcome = res.Outcome
		writeJSON(w, http.StatusConflict, body)
		return
	}
	// An intent still pending has no tenant this instance knows: the
	// record carries the caller's, and the router cancels only an intent of
	// that tenant.
	c := intents.Cancel{IntentID: id, Reason: reason, Tenant: tenant}
	if err := s.pub.PublishCancel(r.Context(), c); err != nil {
		s.log.LogAttrs(r.Context(), slog.LevelWarn, "publish cancel failed", slog.String("intent_id", id), slog.Any("error", err))
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "the cancellation could not be published; retry", "")
		return
	}
	writeJSON(w, http.StatusAccepted, cancelRequested{IntentID: id, Status: "cancel_requested"})
}

// cancelReason reads the optional reason: ?reason=TEXT, else the body
// {"reason":"TEXT"} (an empty body is no reason). On failure it has
// answered and returns false.
func (s *Server) cancelReason(w http.ResponseWriter, r *http.Request) (string, bool) {
	reason := r.URL.Query().Get("reason")
	if !r.URL.Query().Has("reason") {
		body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		dec := json.NewDecoder(body)
		dec.DisallowUnknownFields()
		var b cancelBody
		if err := dec.Decode(&b); err != nil && !errors.Is(err, io.EOF) {
			if s.writeBodyError(w, err) {
				return "", false
			}
			writeError(w, http.StatusBadRequest, codeInvalidJSON,
				`the body must be empty or a JSON object such as {"reason":"user closed the tab"}: `+err.Error(), "")
			return "", false
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			if s.writeBodyError(w, err) {
				return "", false
			}
			writeError(w, http.StatusBadRequest, codeInvalidJSON, errTrailingData.Error(), "")
			return "", false
		}
		reason = b.Reason
	}
	if len(reason) > MaxCancelReason {
		writeError(w, http.StatusBadRequest, codeInvalidParameter,
			fmt.Sprintf("the reason is %d bytes long; the limit is %d", len(reason), MaxCancelReason), "reason")
		return "", false
	}
	return reason, true
}
