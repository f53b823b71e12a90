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
	// TraceURL is the trace viewer's page for the intent's trace
	// (telemetry.trace_url), when both are known.
	TraceURL string `json:"trace_url,omitempty"`
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
// intent's answer waits up to DURATION for its result. The caller's tenant's
// intent only (tenant.go); another tenant's is not found, word for word as
// an unknown one.
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
		// The waiter is the intent's: the tenant it was found under, else
		// the caller's (the tenant-less one with authentication off).
		wk := intentKey{deref(tenantPtr(p)), id}
		if err == nil {
			wk.tenant = st.Tenant
		}
		res, wt := s.results.await(wk)
		if res == nil {
			if again, aerr := s.lookup.Lookup(r.Context(), tenant, id); aerr == nil || err != nil {
				st, err = again, aerr
			}
		}
		if res == nil && !st.Resolved() {
			// This caller waits: it takes a slot, or is refused. An unknown
			// id and another tenant's wait alike (the lookup found
			// neither), so a refusal tells nothing of other tenants.
			release := s.takeWaitSlot(w, p, 0)
			if release == nil {
				s.results.release(wt)
				return
			}
			res = s.waitFor(r.Context(), wt, wait)
			release()
		}
		s.results.release(wt)
		if res != nil {
			st, err = IntentStatus{IntentID: id, Tenant: wk.tenant, Result: res, Timeout: st.Timeout}, nil
		}
	}
	switch {
	case err == nil && st.Resolved():
		writeJSON(w, http.StatusOK, intentView{IntentResult: st.Result, Status: "resolved", Timeout: st.Timeout, Events: timeline(st.Result, st.Timeout, nil), TraceURL: s.tracing.traceLink(st.Result)})
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
