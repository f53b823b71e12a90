package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// Tenants. An intent is known by its tenant and its id (intentKey): two
// tenants that use one id have two intents, each with its own result, and
// nothing one does with its intent reaches the other's. With authentication
// on, every credential acts for one tenant:
//
//   - POST /v1/intents stamps the intent with the credential's tenant; a body
//     naming another tenant is refused (403 forbidden_tenant) rather than
//     silently rewritten, so that a client's mistake shows; ?wait waits for
//     the result of the caller's intent only;
//   - GET and DELETE /v1/intents/{id} see the caller's tenant's intent only:
//     another tenant's intent with that id is answered word for word as an
//     unknown one (its existence is not revealed);
//   - a stream connection receives only its tenant's results, whatever it
//     subscribes to (a result without a tenant belongs to no tenant).
//
// With authentication off there are no callers' tenants: everyone sees
// everything, and an intent id names the tenant-less intent, else the
// oldest this instance remembers with that id (POST still uses the body's
// tenant, which is the intent's).

// tenantOf returns the tenant a result belongs to ("" for none).
func tenantOf(res *schemas.IntentResult) string {
	if res == nil || res.Tenant == nil {
		return ""
	}
	return *res.Tenant
}

// stampTenant sets req's tenant to the principal's, or answers 403
// forbidden_tenant (and returns false) if the body names another one.
func stampTenant(w http.ResponseWriter, p *principal, req *schemas.IntentRequest) bool {
	if p == nil {
		return true
	}
	if req.Tenant != nil && *req.Tenant != p.tenant {
		writeError(w, http.StatusForbidden, codeForbiddenTenant,
			fmt.Sprintf("the credential acts for tenant %q, not %q: leave tenant out, it is set from the credential", p.tenant, *req.Tenant), "tenant")
		return false
	}
	t := p.tenant
	req.Tenant = &t
	return true
}

// hasResult reports whether e holds a result (not only a timeout event).
func hasResult(e *entry) bool { return e.res != nil }

// findFor returns the entry of intent id as p sees it (want filtering the
// entries considered), or nil: p's tenant's own with authentication on,
// else any tenant's (the tenant-less one first). Called with Results.mu
// held.
func (r *Results) findFor(tenant *string, id string, want func(*entry) bool) *entry {
	if tenant != nil {
		if e := r.st.get(intentKey{*tenant, id}); e != nil && want(e) {
			return e
		}
		return nil
	}
	return r.st.anyTenant(id, want)
}

// storedFor returns the stored result of intent id that s may receive, or
// nil. Called with Results.mu held.
func (r *Results) storedFor(s *subscriber, id string) *entry {
	return r.findFor(s.tenant, id, hasResult)
}

// tenantPtr is p's tenant as a pointer: nil without authentication.
func tenantPtr(p *principal) *string {
	if p == nil {
		return nil
	}
	return &p.tenant
}

// admits reports whether a result may be sent to the subscriber: any result
// if it is not scoped to a tenant (authentication off), else only its
// tenant's. It is called under Results.mu, for results sent by Add and for
// stored results sent on subscribe.
func (s *subscriber) admits(res *schemas.IntentResult) bool {
	return s.tenant == nil || tenantOf(res) == *s.tenant
}

// admitsEvent reports whether s may receive ev: a result or a timeout event
// of its tenant (any, without one).
func (s *subscriber) admitsEvent(ev *event) bool {
	switch {
	case ev.entry != nil:
		return s.admits(ev.entry.res)
	case ev.timeout != nil:
		return s.admitsTimeout(ev.timeout)
	case ev.progress != nil:
		return s.admitsProgress(ev.progress)
	}
	return s.tenant == nil
}

// admitsTimeout reports whether s may receive a timeout event: one of its
// tenant (an event without a tenant belongs to no tenant, like a result).
func (s *subscriber) admitsTimeout(t *schemas.IntentTimeout) bool {
	return s.tenant == nil || (t.Tenant != nil && *t.Tenant == *s.tenant)
}

// scope limits the subscriber to p's tenant (nothing with p nil). Call it
// before the first subscribe.
func (s *subscriber) scope(p *principal) {
	if p != nil {
		t := p.tenant
		s.tenant = &t
	}
}

// admitStream counts a new stream connection (WebSocket, or an event
// stream) of p's tenant, or returns the refusal to answer with: 503
// overloaded (reason stream_connections) when the instance already holds
// Config.MaxConnections, 429 too_many_connections when the tenant holds
// Config.MaxConnectionsPerTenant. Without authentication only the
// instance's bound applies. Each nil must be paired with releaseStream.
func (s *Server) admitStream(p *principal) (refuse func(http.ResponseWriter)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.streamConns >= s.cfg.MaxConnections:
		ref := &Refusal{Reason: ReasonStreamConnections, Waiting: s.streamConns, Limit: s.cfg.MaxConnections, RetryAfter: time.Second}
		s.streamsRefused.Inc()
		return func(w http.ResponseWriter) { writeRefusal(w, ref) }
	case p != nil && s.tenantConns[p.tenant] >= s.cfg.MaxConnectionsPerTenant:
		return func(w http.ResponseWriter) { s.refuseStream(w, p) }
	}
	s.streamConns++
	if p != nil {
		s.tenantConns[p.tenant]++
	}
	return nil
}

func (s *Server) releaseStream(p *principal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streamConns--
	if p == nil {
		return
	}
	if s.tenantConns[p.tenant]--; s.tenantConns[p.tenant] <= 0 {
		delete(s.tenantConns, p.tenant)
	}
}

// refuseStream answers an upgrade over the tenant's connection cap.
func (s *Server) refuseStream(w http.ResponseWriter, p *principal) {
	s.metrics.wsTenantRefused.Inc()
	writeError(w, http.StatusTooManyRequests, codeTooManyConnections,
		fmt.Sprintf("tenant %q already holds %d stream connections; close one first", p.tenant, s.cfg.MaxConnectionsPerTenant), "")
}
