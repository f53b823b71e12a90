package api

import (
	"cmp"
	"context"
	"slices"

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
	var scope *string
	if tenant != "" {
		scope = &tenant
	}
	if e := r.findFor(scope, id, hasResult); e != nil {
		return stateOf(e), true
	}
	r.stats.expire()
	k, ok := intentKey{tenant, id}, false
	var f flight
	if f, ok = r.stats.inflight[k]; !ok && scope == nil {
		// Authentication off sees every tenant's: any in flight with the id.
		for fk, ff := range r.stats.inflight {
			if fk.id == id {
				k, f, ok = fk, ff, true
				break
			}
		}
	}
	if !ok {
		return IntentState{}, false
	}
	st := IntentState{IntentID: id, IntentType: f.intentType, Tenant: k.tenant, SubmittedAt: f.at / 1e6}
	if e := r.st.get(k); e != nil {
		st.Timeout = e.timeout
	}
	return st, true
}

// stateOf is what an entry with a result says of its intent.
func stateOf(e *entry) IntentState {
	return IntentState{
		IntentID: e.key.id, IntentType: e.res.IntentType, Tenant: e.key.tenant, Result: e.res,
		Timeout: e.timeout, SubmittedAt: e.res.Timeline.ReceivedAt,
	}
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
		f, ok := r.stats.inflight[ref.key]
		if !ok || f.at != ref.at || (tenant != "" && ref.key.tenant != tenant) {
			continue
		}
		out = append(out, IntentState{IntentID: ref.key.id, IntentType: f.intentType, Tenant: ref.key.tenant, SubmittedAt: f.at / 1e6})
	}
	var held []*entry
	for t, sh := range r.st.tenants {
		if tenant != "" && t != tenant {
			continue
		}
		for e := sh.oldest; e != nil; e = e.newer {
			if e.res != nil {
				held = append(held, e)
			}
		}
	}
	slices.SortFunc(held, func(a, b *entry) int { return cmp.Compare(b.seq, a.seq) })
	for _, e := range held {
		if len(out) == limit {
			break
		}
		out = append(out, stateOf(e))
	}
	return out
}

// Submitted counts an intent published through this instance (by a door
// other than POST /v1/intents, such as the MCP endpoint) as pending until
// its result arrives: GET /v1/intents/{id}, the live counts and
// [IntentLookup] then know it.
func (r *Results) Submitted(id, intentType, tenant string) {
	r.submitted(intentKey{tenant, id}, intentType)
}

// Await returns the result of tenant's intent id ("" for an intent without
// a tenant) at once if this instance holds it, else a channel that receives
// it when the feed brings it, and a release func to call when done waiting
// (always, even after a receive).
func (r *Results) Await(tenant, id string) (*schemas.IntentResult, <-chan *schemas.IntentResult, func()) {
	res, w := r.await(intentKey{tenant, id})
	if res != nil {
		return res, nil, func() {}
	}
	return nil, w.c, func() { r.release(w) }
}
