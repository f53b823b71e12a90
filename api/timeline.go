package api

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"

	"github.com/go-chi/chi/v5"

	"github.com/switchboard-mcp/switchboard/intents"
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

// pendingView is the body of GET /v1/intents/{id} for an intent that has
// no result yet: its pending state (state, agent, deadline...) when the
// router's changelog or this instance knows it.
type pendingView struct {
	IntentID string `json:"intent_id"`
	Status   string `json:"status"` // "pending"
	*PendingState
	Timeout *schemas.IntentTimeout `json:"timeout,omitempty"`
	Events  []timelineEvent        `json:"events"`
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
// millisecond in their natural order): from its result, or while it is
// pending from its pending state.
func timeline(res *schemas.IntentResult, t *schemas.IntentTimeout, pend *PendingState) []timelineEvent {
	var ev []timelineEvent
	if res == nil && pend != nil {
		if pend.ReceivedAt != 0 {
			ev = append(ev, timelineEvent{Event: "received", At: pend.ReceivedAt})
		}
		if pend.DispatchedAt != 0 {
			ev = append(ev, timelineEvent{Event: "dispatched", At: pend.DispatchedAt, Detail: pend.Agent})
		}
	}
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

// getIntent serves GET /v1/intents/{id}[?wait=DURATION]: the intent's
// result and timeline, or its pending state, from this instance's memory or
// the lookup store, whichever instance took it. With ?wait, a pending
// intent's answer waits up to DURATION for its result.
func (s *Server) getIntent(w http.ResponseWriter, r *http.Request) {
	id, ok := intentIDParam(w, r)
	if !ok {
		return
	}
	wait, err := parseWait(r.URL.Query(), s.cfg.MaxWait)
	if err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidParameter, err.Error(), "wait")
		return
	}
	p := principalFrom(r.Context())
	tenant := lookupTenant(p)
	st, err := s.lookup.Lookup(r.Context(), tenant, id)
	if wait > 0 && !st.Resolved() {
		// Register the waiter, then look again: a result that lands in
		// between is found by one or the other.
		res, wt := s.awaitVisible(p, id)
		if res == nil {
			if again, aerr := s.lookup.Lookup(r.Context(), tenant, id); aerr == nil || err != nil {
				st, err = again, aerr
			}
		}
		if res == nil && !st.Resolved() {
			res = s.waitFor(r.Context(), wt, wait)
		}
		s.results.release(wt)
		if res != nil && visible(p, res) {
			st, err = IntentStatus{IntentID: id, Tenant: tenantOf(res), Result: res, Timeout: st.Timeout}, nil
		}
	}
	switch {
	case err == nil && st.Resolved():
		writeJSON(w, http.StatusOK, intentView{IntentResult: st.Result, Status: "resolved", Timeout: st.Timeout, Events: timeline(st.Result, st.Timeout, nil)})
	case err == nil:
		writeJSON(w, http.StatusOK, pendingView{IntentID: id, Status: "pending", PendingState: st.Pending, Timeout: st.Timeout, Events: timeline(nil, st.Timeout, st.Pending)})
	case errors.Is(err, ErrLookupCatchingUp):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, codeNotReady,
			fmt.Sprintf("intent %q is not known yet: this instance is still reading the results topic since its start; retry", id), "")
	case errors.Is(err, ErrIntentNotFound):
		writeError(w, http.StatusNotFound, codeNotFound,
			fmt.Sprintf("no intent %q: unknown, or older than the results topic keeps", id), "")
	default:
		s.log.LogAttrs(r.Context(), slog.LevelWarn, "intent lookup failed", slog.String("intent_id", id), slog.Any("error", err))
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "the intent could not be looked up; retry", "")
	}
}

// intentIDParam returns the {id} of the route, unescaped, or answers 400
// (and returns false) when it is no intent id: ids are 1 to
// intents.MaxIDLen bytes of printable UTF-8, so nothing else is looked up.
func intentIDParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := chi.URLParam(r, "id")
	if r.URL.RawPath != "" {
		if u, err := url.PathUnescape(id); err == nil {
			id = u
		}
	}
	if !intents.ValidID(id) {
		shown := id
		if len(shown) > 64 {
			shown = shown[:64] + "..."
		}
		writeError(w, http.StatusBadRequest, codeInvalidParameter,
			fmt.Sprintf("%q is not an intent id: ids are 1 to %d bytes of printable UTF-8 without spaces", shown, intents.MaxIDLen), "id")
		return "", false
	}
	return id, true
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
