package api

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// IntentLookup answers for any intent of the cluster, whichever instance
// took it and whenever it resolved, for as long as the results topic keeps
// its result: GET /v1/intents/{id}, DELETE's 409, ?wait and WebSocket
// subscriptions by id ask it when this instance's memory ([Results]) does not
// hold the answer, and the MCP task lookups ask it directly. The store that
// implements it (package api/lookup) is materialised on every instance from
// the results and timeouts topics and the pending changelog.
//
// Tenants: (tenant, id) names one intent; "" is the tenant of intents that
// have none. Another tenant's intent is ErrIntentNotFound, like an unknown
// one. Implementations must be safe for concurrent use and honour ctx.
type IntentLookup interface {
	// Lookup returns what is known of intent id of tenant: its result (and
	// timeout event) once resolved, its pending state before. It returns
	// ErrIntentNotFound if there is no such intent, and ErrLookupCatchingUp
	// for a miss while the store has not yet read the topics up to where
	// they ended when the instance started (the answer could be wrong).
	// tenant AnyTenant (authentication off) matches every tenant,
	// intents without one first.
	Lookup(ctx context.Context, tenant, id string) (IntentStatus, error)

	// Recent lists tenant's intents, newest first (by the time the router
	// received them), at most limit of them, starting after the cursor
	// before ("" for the newest). It returns the cursor of the next page,
	// "" when there is none.
	Recent(ctx context.Context, tenant string, limit int, before string) ([]IntentStatus, string, error)
}

// AnyTenant is the tenant to look up with when authentication is off: no
// tenants, so every intent is visible. It is no valid tenant (tenants are
// printable).
const AnyTenant = "\x00any"

// IntentStatus is what is known of one intent: Result once it resolved,
// Pending before, Timeout if it timed out (which may come before its
// result).
type IntentStatus struct {
	IntentID string
	Tenant   string
	Result   *schemas.IntentResult  // nil while pending
	Timeout  *schemas.IntentTimeout // the timeout event, if any
	Pending  *PendingState          // nil once resolved, or when unknown
}

// Resolved reports whether the intent has its result.
func (s IntentStatus) Resolved() bool { return s.Result != nil }

// IntentType is the intent's type, from whichever of its records is known
// ("" if none says).
func (s IntentStatus) IntentType() string {
	switch {
	case s.Result != nil:
		return s.Result.IntentType
	case s.Pending != nil && s.Pending.IntentType != "":
		return s.Pending.IntentType
	case s.Timeout != nil:
		return s.Timeout.IntentType
	}
	return ""
}

// ReceivedAt is when the intent was received (unix ms; 0: not known).
func (s IntentStatus) ReceivedAt() int64 {
	switch {
	case s.Result != nil:
		return s.Result.Timeline.ReceivedAt
	case s.Pending != nil:
		return s.Pending.ReceivedAt
	}
	return 0
}

// Pending states of an intent (PendingState.State).
const (
	PendingReceived   = "received"   // taken by this instance, not yet seen in the pending changelog
	PendingQueued     = "queued"     // waiting in its agent's admission queue
	PendingDispatched = "dispatched" // sent to its agent, awaiting the answer
	PendingRetrying   = "retrying"   // waiting for a retry after a retryable agent error
	PendingResolving  = "resolving"  // the router resolved it; its result is on its way
)

// PendingState is an unresolved intent's state, from the router's pending
// changelog (any instance) or, for PendingReceived, from this instance's
// memory of what it submitted. Times are unix ms; zero means unknown.
type PendingState struct {
	State        string `json:"state"`
	IntentType   string `json:"intent_type,omitempty"`
	Agent        string `json:"agent,omitempty"`
	ReceivedAt   int64  `json:"received_at,omitempty"`
	DispatchedAt int64  `json:"dispatched_at,omitempty"`
	Deadline     int64  `json:"deadline,omitempty"`
	IdleDeadline int64  `json:"idle_deadline,omitempty"`
	RetryAt      int64  `json:"retry_at,omitempty"`
	Attempt      int32  `json:"attempt,omitempty"`
	Outcome      string `json:"outcome,omitempty"` // with PendingResolving: how it resolved
}

var (
	// ErrIntentNotFound is returned by an [IntentLookup] for an unknown
	// intent, another tenant's, or one whose result the results topic no
	// longer keeps.
	ErrIntentNotFound = errors.New("api: no such intent")

	// ErrLookupCatchingUp is returned by an [IntentLookup] for a miss while
	// it is still reading what the topics held when the instance started:
	// the intent may be there. Retry once /readyz is 200.
	ErrLookupCatchingUp = errors.New("api: the lookup store is catching up with Kafka")

	// ErrInvalidCursor is returned by [IntentLookup.Recent] for a cursor it
	// did not hand out.
	ErrInvalidCursor = errors.New("api: invalid cursor")
)

// WithLookup makes the server answer for intents this instance's memory
// does not hold from l (see [IntentLookup]). Without it, lookups see only
// what [Results] holds.
func WithLookup(l IntentLookup) Option { return func(o *options) { o.lookup = l } }

// NewIntentLookup returns the IntentLookup of an instance: its memory
// (results: the results it read since it started, the intents it
// submitted) first, then store, the store of the whole cluster's intents
// (nil: none, memory only). The server builds its own with [WithLookup];
// other doors of the instance (the MCP endpoint) use this one.
func NewIntentLookup(results *Results, store IntentLookup) IntentLookup {
	return &intentLookup{results: results, store: store}
}

// intentLookup is the server's IntentLookup: see NewIntentLookup.
type intentLookup struct {
	results *Results
	store   IntentLookup // nil: none
}

var _ IntentLookup = (*intentLookup)(nil)

// Lookup implements IntentLookup: a result in memory, else what the store
// knows, else what memory knows of an unresolved intent (submitted here,
// or timed out).
func (l *intentLookup) Lookup(ctx context.Context, tenant, id string) (IntentStatus, error) {
	mem, merr := l.results.Lookup(ctx, tenant, id)
	if merr == nil && mem.Resolved() {
		if mem.Timeout == nil && l.store != nil && mem.Result.Outcome != schemas.OutcomeAnswered {
			// A timeout event read before this instance started is in
			// the store only.
			if st, err := l.store.Lookup(ctx, mem.Tenant, id); err == nil {
				mem.Timeout = st.Timeout
			}
		}
		return mem, nil
	}
	err := ErrIntentNotFound
	if l.store != nil {
		st, serr := l.store.Lookup(ctx, tenant, id)
		if serr == nil {
			if st.Timeout == nil && merr == nil && mem.Tenant == st.Tenant {
				st.Timeout = mem.Timeout
			}
			return st, nil
		}
		if !errors.Is(serr, ErrIntentNotFound) {
			err = serr
		}
	}
	if merr == nil {
		return mem, nil
	}
	return IntentStatus{}, err
}

// Recent implements IntentLookup: the store's list, or memory's without a
// store.
func (l *intentLookup) Recent(ctx context.Context, tenant string, limit int, before string) ([]IntentStatus, string, error) {
	if l.store == nil {
		return l.results.Recent(ctx, tenant, limit, before)
	}
	return l.store.Recent(ctx, tenant, limit, before)
}

// stored returns the result the store holds for tenant's intent id, or nil.
// It asks the store only, for callers that found nothing in memory.
func (l *intentLookup) stored(ctx context.Context, tenant, id string) *schemas.IntentResult {
	if l.store == nil {
		return nil
	}
	st, err := l.store.Lookup(ctx, tenant, id)
	if err != nil {
		return nil
	}
	return st.Result
}

// lookupTenant is the tenant a caller looks up as: its principal's, or
// AnyTenant with authentication off.
func lookupTenant(p *principal) string {
	if p == nil {
		return AnyTenant
	}
	return p.tenant
}

// IntentLookup returns the server's lookup: this instance's memory, then the
// store given with [WithLookup]. It applies no tenant rule of its own: pass
// the caller's tenant (AnyTenant with authentication off).
func (s *Server) IntentLookup() IntentLookup { return s.lookup }

// sendStoredResults sends sub, for each id it still waits on by intent-id
// subscription (its result was not in this instance's memory), the result
// the lookup store holds, if any: an intent that resolved before this
// instance started, or on another one long ago. Called by the connection's
// reader after subscribe.
func (s *Server) sendStoredResults(ctx context.Context, sub *subscriber, ids []string) {
	if s.lookup.store == nil {
		return
	}
	tenant := AnyTenant
	if sub.tenant != nil { // set before the first subscribe, never changed
		tenant = *sub.tenant
	}
	for _, id := range ids {
		if !s.results.waitsFor(sub, id) {
			continue
		}
		if res := s.lookup.stored(ctx, tenant, id); res != nil {
			s.results.sendStored(sub, res)
		}
	}
}

// waitsFor reports whether sub holds an intent-id subscription to id.
func (r *Results) waitsFor(sub *subscriber, id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := sub.intents[id]
	return ok
}

// sendStored sends sub a result read from the lookup store and ends its
// subscription to that intent, unless the subscription has already ended:
// the feed delivered the result meanwhile, or the client unsubscribed. So
// the result is sent once, by the feed or from the store.
func (r *Results) sendStored(sub *subscriber, res *schemas.IntentResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := sub.intents[res.IntentID]; !ok || !sub.admits(res) {
		return
	}
	body, err := json.Marshal(res)
	if err != nil {
		return
	}
	delete(sub.intents, res.IntentID)
	removeIndex(r.byIntent, res.IntentID, sub)
	r.send(sub, frame("result", r.cursorFor(sub), "result", body))
}

// resolveStored ends watch with the result the lookup store holds for
// tenant's intent id, if it holds one: the watch then has that one event,
// as if the result had been in memory when it began (an event stream of an
// intent that resolved before this instance read it). Called before the
// watch is read.
func (s *Server) resolveStored(ctx context.Context, watch *Watch, tenant, id string) {
	res := s.lookup.stored(ctx, tenant, id)
	if res == nil {
		return
	}
	r := watch.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if watch.closed || !watch.admitsResult(res) {
		return
	}
	watch.offer(WatchEvent{Result: res})
	watch.resolved = true
	watch.end(nil)
}
