package api

import (
	"cmp"
	"context"
	"slices"

	"github.com/switchboard-mcp/switchboard/schemas"
)

var _ IntentLookup = (*Results)(nil)

// scopeOf is the Results scope of an [IntentLookup] tenant: nil (every
// tenant's) for AnyTenant.
func scopeOf(tenant string) *string {
	if tenant == AnyTenant {
		return nil
	}
	return &tenant
}

// Lookup implements [IntentLookup] with this instance's memory: the
// results and timeout events it has read since it started (every instance
// reads them all), and the intents published through it that are still
// pending (PendingReceived). An intent published through another instance
// is found once it has resolved, but not while it is pending; one older
// than the memory's capacity, or resolved before this instance started, is
// not found: the store of package api/lookup answers for those (the
// server's IntentLookup asks it next).
func (r *Results) Lookup(_ context.Context, tenant, id string) (IntentStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	scope := scopeOf(tenant)
	if e := r.findFor(scope, id, hasResult); e != nil {
		return statusOf(e), nil
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
	if ok {
		st := IntentStatus{IntentID: id, Tenant: k.tenant, Pending: &PendingState{
			State: PendingReceived, IntentType: f.intentType, ReceivedAt: f.at / 1e6,
		}}
		if e := r.st.get(k); e != nil {
			st.Timeout = e.timeout
		}
		return st, nil
	}
	if e := r.findFor(scope, id, func(e *entry) bool { return e.timeout != nil }); e != nil {
		// Timed out, its result on its way.
		t := e.timeout
		return IntentStatus{IntentID: id, Tenant: e.key.tenant, Timeout: t, Pending: &PendingState{
			State: PendingResolving, IntentType: t.IntentType, Agent: t.Agent, Deadline: t.Deadline,
		}}, nil
	}
	return IntentStatus{}, ErrIntentNotFound
}

// statusOf is what an entry with a result says of its intent.
func statusOf(e *entry) IntentStatus {
	return IntentStatus{IntentID: e.key.id, Tenant: e.key.tenant, Result: e.res, Timeout: e.timeout}
}

// Recent implements [IntentLookup] from this instance's memory: the
// tenant's pending intents published here (newest first), then its
// results, newest first (AnyTenant: every tenant's). It scans the memory
// (at most its capacity) and keeps no pages: a cursor (before) lists
// nothing.
func (r *Results) Recent(_ context.Context, tenant string, limit int, before string) ([]IntentStatus, string, error) {
	if limit <= 0 || before != "" {
		return nil, "", nil
	}
	all := tenant == AnyTenant
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.expire()
	var out []IntentStatus
	for i := len(r.stats.flights) - 1; i >= 0 && len(out) < limit; i-- {
		ref := r.stats.flights[i]
		f, ok := r.stats.inflight[ref.key]
		if !ok || f.at != ref.at || (!all && ref.key.tenant != tenant) {
			continue
		}
		out = append(out, IntentStatus{IntentID: ref.key.id, Tenant: ref.key.tenant, Pending: &PendingState{
			State: PendingReceived, IntentType: f.intentType, ReceivedAt: f.at / 1e6,
		}})
	}
	var held []*entry
	for t, sh := range r.st.tenants {
		if !all && t != tenant {
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
		out = append(out, statusOf(e))
	}
	return out, "", nil
}

// Submitted counts an intent published through this instance (by a door
// other than POST /v1/intents, such as the MCP endpoint) as pending until
// its result arrives: GET /v1/intents/{id}, the live counts and
// [Results.Lookup] then know it.
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
