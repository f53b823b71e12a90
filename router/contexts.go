package router

import (
	"time"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// ContextLookup gives the router the context snapshots it attaches to the
// intents of types with context: attach. *contexts.Store implements it.
type ContextLookup interface {
	// Lookup returns the snapshot held for entity in tenant's namespace (""
	// for none) and whether it is fresh (at most maxAge old) or stale, or
	// nil and ContextMissing. It is called on the event loop: it must be
	// quick, never block on I/O, and be safe for concurrent use. The
	// snapshot is not modified by the router.
	Lookup(tenant, entity string, maxAge time.Duration) (*schemas.ContextSnapshot, schemas.ContextStatus)
}

// WithContexts sets where the router finds context snapshots. Without one,
// intents of types with context: attach are dispatched with status missing.
func WithContexts(c ContextLookup) Option { return func(o *options) { o.contexts = c } }

// attachContext puts the snapshot of the intent's context_ref, and how fresh
// it is, in the AgentRequest when its intent type asks for context, and
// remembers its version and time for the result's timeline. An intent without
// a context_ref gets neither. The entity is looked up in the intent's
// tenant's namespace only: another tenant's entity of that id is missing.
func (e *engine) attachContext(p *pending, ar *schemas.AgentRequest) {
	if !p.route.attachContext || p.contextRef == nil {
		return
	}
	status := schemas.ContextMissing
	var snap *schemas.ContextSnapshot
	if e.contexts != nil {
		snap, status = e.contexts.Lookup(intents.TenantOf(p.tenant), *p.contextRef, p.route.contextMaxAge)
	}
	ar.Context, ar.ContextStatus = snap, &status
	p.contextVersion, p.contextTs = nil, nil
	if snap != nil {
		p.contextVersion, p.contextTs = &snap.Version, &snap.SnapshotTs
	}
}
