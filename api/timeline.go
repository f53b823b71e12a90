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

// getIntent serves GET /v1/intents/{id}.
func (s *Server) getIntent(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if r.URL.RawPath != "" {
		if u, err := url.PathUnescape(id); err == nil {
			id = u
		}
	}
	res, to, inflight, owner := s.results.lookup(id)
	if p := principalFrom(r.Context()); p != nil {
		// Another tenant's intent is not found, word for word as an unknown
		// one: its existence is not revealed.
		if res != nil && !visible(p, res) {
			res, to, inflight = nil, nil, false
		}
		if to != nil && (to.Tenant == nil || *to.Tenant != p.tenant) {
			to = nil
		}
		if inflight && owner != p.tenant {
			inflight = false
		}
	}
	switch {
	case res != nil:
		writeJSON(w, http.StatusOK, intentView{IntentResult: res, Status: "resolved", Timeout: to, Events: timeline(res, to)})
	case to != nil || inflight:
		writeJSON(w, http.StatusOK, pendingView{IntentID: id, Status: "pending", Timeout: to, Events: timeline(nil, to)})
	default:
		writeError(w, http.StatusNotFound, codeNotFound,
			fmt.Sprintf("no result for intent %q on this instance: it may still be pending, or older than this instance remembers", id), "")
	}
}

// lookup returns what this instance knows of an intent: its result, its
// timeout event, whether it was submitted here and is unresolved, and then
// its tenant.
func (r *Results) lookup(id string) (*schemas.IntentResult, *schemas.IntentTimeout, bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var res *schemas.IntentResult
	if e, ok := r.byID[id]; ok {
		res = e.res
	}
	r.stats.expire()
	_, inflight := r.stats.inflight[id]
	return res, r.timeouts[id], inflight, r.stats.owner[id]
}

// storeTimeout keeps a timeout event for GET /v1/intents/{id}, evicting the
// oldest beyond the store's capacity. Called with mu held.
func (r *Results) storeTimeout(t *schemas.IntentTimeout) {
	if _, ok := r.timeouts[t.IntentID]; ok {
		r.timeouts[t.IntentID] = t
		return
	}
	if old := r.tring[r.tnext]; old != "" {
		delete(r.timeouts, old)
	}
	r.tring[r.tnext] = t.IntentID
	r.tnext = (r.tnext + 1) % len(r.tring)
	r.timeouts[t.IntentID] = t
}
