package api

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/go-chi/chi/v5"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// intentView is the body of GET /v1/intents/{id}: the result's fields
// (when resolved), the timeout event (if the intent timed out) and the
// intent's timeline as a list of events in time order.
type intentView struct {
	*schemas.IntentResult
	Status  string                 `json:"status"` // "resolved" or "pending"
	Timeout *schemas.IntentTimeout `json:"timeout,omitempty"`
	Events  []timelineEvent        `json:"events"`
	// TraceURL is the trace viewer's page for the intent's trace
	// (telemetry.trace_url), when both are known.
	TraceURL string `json:"trace_url,omitempty"`
}

// pendingView is the body of GET /v1/intents/{id} for an intent this
// instance knows but that has no result yet.
type pendingView struct {
	IntentID string                 `json:"intent_id"`
	Status   string                 `json:"status"` // "pending"
	Timeout  *schemas.IntentTimeout `json:"timeout,omitempty"`
	Events   []timelineEvent        `json:"events"`
}

// timelineEvent is one step of an intent: received, dispatched, answered,
// timed_out or resolved, at a unix ms time.
type timelineEvent struct {
	Event   string `json:"event"`
	At      int64  `json:"at"`
	Detail  string `json:"detail,omitempty"`
	Outcome string `json:"outcome,omitempty"`
}

// timeline lists an intent's events in time order (steps at the same
// millisecond in their natural order).
func timeline(res *schemas.IntentResult, t *schemas.IntentTimeout) []timelineEvent {
	var ev []timelineEvent
	if res != nil {
		tl := res.Timeline
		ev = append(ev, timelineEvent{Event: "received", At: tl.ReceivedAt})
		if tl.DispatchedAt != nil {
			ev = append(ev, timelineEvent{Event: "dispatched", At: *tl.DispatchedAt, Detail: res.Agent})
		}
		if tl.AnsweredAt != nil {
			ev = append(ev, timelineEvent{Event: "answered", At: *tl.AnsweredAt})
		}
	}
	if t != nil {
		ev = append(ev, timelineEvent{
			Event: "timed_out", At: t.TimedOutAt,
			Detail: fmt.Sprintf("%s after %d ms, fallback %s", t.Reason, t.ElapsedMs, t.Fallback),
		})
	}
	if res != nil {
		ev = append(ev, timelineEvent{Event: "resolved", At: res.Timeline.ResolvedAt, Outcome: string(res.Outcome)})
	}
	slices.SortStableFunc(ev, func(a, b timelineEvent) int {
		switch {
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	})
	return ev
}

// getIntent serves GET /v1/intents/{id}: the caller's tenant's intent
// (tenant.go); another tenant's is not found, word for word as an unknown
// one.
func (s *Server) getIntent(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if r.URL.RawPath != "" {
		if u, err := url.PathUnescape(id); err == nil {
			id = u
		}
	}
	res, to, inflight := s.results.lookup(tenantPtr(principalFrom(r.Context())), id)
	switch {
	case res != nil:
		writeJSON(w, http.StatusOK, intentView{IntentResult: res, Status: "resolved", Timeout: to, Events: timeline(res, to), TraceURL: s.tracing.traceLink(res)})
	case to != nil || inflight:
		writeJSON(w, http.StatusOK, pendingView{IntentID: id, Status: "pending", Timeout: to, Events: timeline(nil, to)})
	default:
		writeError(w, http.StatusNotFound, codeNotFound,
			fmt.Sprintf("no result for intent %q on this instance: it may still be pending, or older than this instance remembers", id), "")
	}
}

// lookup returns what this instance knows of intent id as tenant's caller
// sees it (nil: any tenant's, authentication off): its result, its last
// timeout event, and whether it was submitted here and is unresolved.
func (r *Results) lookup(tenant *string, id string) (*schemas.IntentResult, *schemas.IntentTimeout, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.expire()
	e := r.findFor(tenant, id, func(*entry) bool { return true })
	if e == nil {
		_, inflight := r.stats.inflight[intentKey{deref(tenant), id}]
		return nil, nil, inflight
	}
	_, inflight := r.stats.inflight[e.key]
	return e.res, e.timeout, inflight
}
