package routertest

import (
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// Contexts is a router.ContextLookup over snapshots put in by the test,
// judged against a clock (a contexts.Store without Kafka). It records the
// lookups it answered. It is safe for concurrent use.
type Contexts struct {
	clock clockwork.Clock

	mu      sync.Mutex
	snaps   map[string]*schemas.ContextSnapshot
	lookups []string
}

var _ router.ContextLookup = (*Contexts)(nil)

// NewContexts returns an empty Contexts whose ages are measured on clock.
func NewContexts(clock clockwork.Clock) *Contexts {
	return &Contexts{clock: clock, snaps: map[string]*schemas.ContextSnapshot{}}
}

// Put holds s for its entity (in its tenant's namespace), replacing what was
// held.
func (c *Contexts) Put(s *schemas.ContextSnapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.snaps[intents.Scoped(intents.TenantOf(s.Tenant), s.EntityID)] = s
}

// Lookup implements router.ContextLookup. It records the entity looked up,
// as intents.Scoped(tenant, entity).
func (c *Contexts) Lookup(tenant, entity string, maxAge time.Duration) (*schemas.ContextSnapshot, schemas.ContextStatus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := intents.Scoped(tenant, entity)
	c.lookups = append(c.lookups, key)
	s := c.snaps[key]
	switch {
	case s == nil:
		return nil, schemas.ContextMissing
	case c.clock.Now().UnixMilli()-s.SnapshotTs > maxAge.Milliseconds():
		return s, schemas.ContextStale
	}
	return s, schemas.ContextFresh
}

// Lookups returns the entities looked up so far, in order.
func (c *Contexts) Lookups() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lookups...)
}
