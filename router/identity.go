package router

import (
	"slices"

	"github.com/switchboard-mcp/switchboard/intents"
)

// Identity. An intent is (tenant, intent_id), tenant "" when it has none:
// the pending table, the dedup window, cancels and the pairing of responses
// are keyed by intents.Scoped(tenant, id), so that two tenants who use the
// same id have two intents, each with its one result, and neither can see,
// cancel, answer or squat the other's. Records on the wire keep the bare id
// as their key: the partition (and so the owning instance) of every tenant's
// intent of one id is the same.

// intentKey is the router's key of an intent.
func intentKey(tenant *string, id string) string { return intents.Scoped(intents.TenantOf(tenant), id) }

// tenantSet is the tenants that hold one id (in the pending table, or in
// the dedup window): almost always one, so the common case allocates
// nothing.
type tenantSet struct {
	first string
	more  []string
}

// idIndex finds, by bare id, the tenants that hold it: what pairs a
// response that does not say its tenant, and what tells a cancel or a
// response for another tenant's intent from one for an unknown intent.
type idIndex map[string]tenantSet

func (x idIndex) add(key string) {
	tenant, id := intents.SplitScoped(key)
	s, ok := x[id]
	if !ok {
		x[id] = tenantSet{first: tenant}
		return
	}
	s.more = append(s.more, tenant)
	x[id] = s
}

// addNew adds key's tenant to its id unless it is there already, and
// reports whether it added it: one lookup for a new key.
func (x idIndex) addNew(key string) bool {
	tenant, id := intents.SplitScoped(key)
	s, ok := x[id]
	switch {
	case !ok:
		x[id] = tenantSet{first: tenant}
		return true
	case s.first == tenant || slices.Contains(s.more, tenant):
		return false
	}
	s.more = append(s.more, tenant)
	x[id] = s
	return true
}

// has reports whether key's tenant holds its id.
func (x idIndex) has(key string) bool {
	tenant, id := intents.SplitScoped(key)
	s, ok := x[id]
	return ok && (s.first == tenant || slices.Contains(s.more, tenant))
}

func (x idIndex) remove(key string) {
	tenant, id := intents.SplitScoped(key)
	s, ok := x[id]
	if !ok {
		return
	}
	switch {
	case s.first == tenant && len(s.more) == 0:
		delete(x, id)
		return
	case s.first == tenant:
		s.first = s.more[len(s.more)-1]
		s.more = s.more[:len(s.more)-1]
	default:
		for i, t := range s.more {
			if t == tenant {
				s.more[i] = s.more[len(s.more)-1]
				s.more = s.more[:len(s.more)-1]
				break
			}
		}
	}
	if len(s.more) == 0 {
		s.more = nil
	}
	x[id] = s
}

// only returns the one tenant that holds id, and how many hold it (0, 1,
// or 2 for two or more).
func (x idIndex) only(id string) (tenant string, n int) {
	s, ok := x[id]
	switch {
	case !ok:
		return "", 0
	case len(s.more) > 0:
		return "", 2
	}
	return s.first, 1
}

// set returns the tenants that hold id and how many they are; s.at(i) is
// the i-th, for i below n.
func (x idIndex) set(id string) (s tenantSet, n int) {
	s, ok := x[id]
	if !ok {
		return s, 0
	}
	return s, 1 + len(s.more)
}

func (s tenantSet) at(i int) string {
	if i == 0 {
		return s.first
	}
	return s.more[i-1]
}

// keep puts p in the pending table, once, and counts what it holds.
func (e *engine) keep(p *pending) {
	if e.pending[p.key] == p {
		return
	}
	e.pending[p.key] = p
	e.pendingIDs.add(p.key)
	e.budget.add(p)
}

// drop takes p out of the pending table, if it is there.
func (e *engine) drop(p *pending) {
	if e.pending[p.key] != p {
		return
	}
	delete(e.pending, p.key)
	e.pendingIDs.remove(p.key)
	e.budget.remove(p)
}

// isPending reports whether p is (still) p's entry in the pending table.
func (e *engine) isPending(p *pending) bool { return e.pending[p.key] == p }
