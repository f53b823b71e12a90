package api

import (
	"context"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// IntentState is what is known of one intent: pending (published, no
// result yet) or resolved (Result set).
type IntentState struct {
	IntentID   string
	IntentType string
	Tenant     string // "" for none
	// Result is the intent's result once it has resolved (nil: pending).
	Result *schemas.IntentResult
	// Timeout is its timeout event, if it timed out.
	Timeout *schemas.IntentTimeout
	// SubmittedAt is when it was published, unix ms (0: not known here).
	SubmittedAt int64
}

// Resolved reports whether the intent has its result.
func (s IntentState) Resolved() bool { return s.Result != nil }

// IntentLookup answers for an intent by (tenant, id), and lists a
// tenant's recent intents. tenant is the caller's: with a tenant, another
// tenant's intent is not found (never revealed); "" (authentication off)
// sees every intent. It is what the MCP endpoint's tasks read (tasks/get,
// tasks/result, tasks/list).
//
// [*Results] implements it with this instance's memory: the results and
// timeout events it has read since it started (every instance reads them
// all), and the intents published through it that are still pending. An
// intent published through another instance is found once it has
// resolved, but not while it is pending; one older than the memory's
// capacity, or resolved before this instance started, is not found. A
// store materialised from Kafka replaces it to answer for any intent from
// any instance (issue 17).
//
// Implementations must be safe for concurrent use.
type IntentLookup interface {
	// LookupIntent returns the intent's state, or false if it is unknown
	// (or another tenant's).
	LookupIntent(ctx context.Context, tenant, id string) (IntentState, bool)
	// RecentIntents returns up to limit of the tenant's intents, the most
	// recent first: pending ones, then resolved ones by resolution time.
	RecentIntents(ctx context.Context, tenant string, limit int) []IntentState
}

var _ IntentLookup = (*Results)(nil)

// LookupIntent implements [IntentLookup] from this instance's memory.
func (r *Results) LookupIntent(_ context.Context, tenant, id string) (IntentState, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := IntentState{IntentID: id}
	if e, ok := r.byID[id]; ok {
		if tenant != "" && tenantOf(e.res) != tenant {
			return IntentState{}, false
		}
		st.IntentType, st.Tenant, st.Result = e.res.IntentType, tenantOf(e.res), e.res
		st.SubmittedAt = e.res.Timeline.ReceivedAt
		if t := r.timeouts[id]; t != nil {
			st.Timeout = t
		}
		return st, true
	}
	r.stats.expire()
	f, ok := r.stats.inflight[id]
	if !ok || (tenant != "" && r.stats.owner[id] != tenant) {
		return IntentState{}, false
	}
	st.IntentType, st.Tenant, st.SubmittedAt = f.intentType, r.stats.owner[id], f.at/1e6
	if t := r.timeouts[id]; t != nil && (tenant == "" || (t.Tenant != nil && *t.Tenant == tenant)) {
		st.Timeout = t
	}
	return st, true
}

// RecentIntents implements [IntentLookup] from this instance's memory: the
// tenant's pending intents published here (newest first), then its
// results, newest first. It scans the memory (at most its capacity).
func (r *Results) RecentIntents(_ context.Context, tenant string, limit int) []IntentState {
	if limit <= 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.expire()
	var out []IntentState
	for i := len(r.stats.flights) - 1; i >= 0 && len(out) < limit; i-- {
		ref := r.stats.flights[i]
		f, ok := r.stats.inflight[ref.id]
		if !ok || f.at != ref.at || (tenant != "" && r.stats.owner[ref.id] != tenant) {
			continue
		}
		out = append(out, IntentState{IntentID: ref.id, IntentType: f.intentType, Tenant: r.stats.owner[ref.id], SubmittedAt: f.at / 1e6})
	}
	n := len(r.ring)
	for i := 1; i <= n && len(out) < limit; i++ {
		id := r.ring[(r.next-i+n)%n]
		if id == "" {
			break
		}
		e := r.byID[id]
		if e == nil || (tenant != "" && tenantOf(e.res) != tenant) {
			continue
		}
		out = append(out, IntentState{
			IntentID: id, IntentType: e.res.IntentType, Tenant: tenantOf(e.res), Result: e.res,
			Timeout: r.timeouts[id], SubmittedAt: e.res.Timeline.ReceivedAt,
		})
	}
	return out
}

// Submitted counts an intent published through this instance (by a door
// other than POST /v1/intents, such as the MCP endpoint) as pending until
// its result arrives: GET /v1/intents/{id}, the live counts and
// [IntentLookup] then know it.
func (r *Results) Submitted(id, intentType, tenant string) { r.submitted(id, intentType, tenant) }

// Await returns the intent's stored result at once if this instance holds
// it (and p may see it), else a channel that receives it when the feed
// brings it, and a release func to call when done waiting (always, even
// after a receive). tenant "" sees every result.
func (r *Results) Await(tenant, id string) (*schemas.IntentResult, <-chan *schemas.IntentResult, func()) {
	res, w := r.await(id)
	if res != nil {
		if tenant != "" && tenantOf(res) != tenant {
			// Another tenant's intent under this id: wait as for a
			// result that does not come.
			return nil, make(chan *schemas.IntentResult), func() {}
		}
		return res, nil, func() {}
	}
	return nil, w.c, func() { r.release(w) }
}
