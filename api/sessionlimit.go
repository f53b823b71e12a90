package api

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxMCPSessions is the default of SessionLimitConfig.Max
// (http.mcp.max_sessions); MaxPerTenant's is half of Max.
const DefaultMaxMCPSessions = 4096

// ReasonMCPSessions is the reason of a refusal by a [SessionLimit]: this
// instance (or the caller's tenant on it) already holds as many MCP
// sessions as it may.
const ReasonMCPSessions = "mcp_sessions"

// SessionLimitConfig bounds the MCP sessions (2025-11-25 and earlier
// revisions: initialize, then Mcp-Session-Id) open on one instance. Zero
// values take the defaults.
type SessionLimitConfig struct {
	// Max bounds all of them.
	Max int
	// MaxPerTenant bounds one tenant's (authenticated callers only), at
	// most Max.
	MaxPerTenant int
}

// SessionLimit counts the MCP sessions open on one instance and refuses
// one more initialize over its bounds (HTTP 503 with a JSON-RPC error,
// reason "mcp_sessions"). Every session holds the SDK's session state and
// its connection's goroutines until it is deleted, closed or idle for
// http.mcp.session_timeout, and may hold a standalone GET stream (one per
// session); without the bound a caller could open them as fast as it can
// send initialize. A nil *SessionLimit bounds nothing. It is safe for
// concurrent use.
type SessionLimit struct{ *slots }

// NewSessionLimit returns a SessionLimit of cfg with its metrics
// registered with reg: the gauge switchboard_api_mcp_sessions and the
// reason "mcp_sessions" of switchboard_api_admission_refused_total.
func NewSessionLimit(cfg SessionLimitConfig, reg prometheus.Registerer) (*SessionLimit, error) {
	if cfg.Max == 0 {
		cfg.Max = DefaultMaxMCPSessions
	}
	if cfg.MaxPerTenant == 0 {
		cfg.MaxPerTenant = max(1, cfg.Max/2)
	}
	switch {
	case reg == nil:
		return nil, fmt.Errorf("%w: NewSessionLimit needs a registerer", ErrInvalidConfig)
	case cfg.Max < 0 || cfg.MaxPerTenant < 0 || cfg.MaxPerTenant > cfg.Max:
		return nil, fmt.Errorf("%w: the MCP session bounds must be positive, a tenant's at most the instance's (%d, %d per tenant)", ErrInvalidConfig, cfg.Max, cfg.MaxPerTenant)
	}
	sl, err := newSlots(ReasonMCPSessions, cfg.Max, cfg.MaxPerTenant, prometheus.GaugeOpts{
		Name: "switchboard_api_mcp_sessions",
		Help: "MCP sessions counted against http.mcp.max_sessions on this instance (a session closed by its idle timeout is counted until the endpoint next looks, within a second).",
	}, reg)
	if err != nil {
		return nil, err
	}
	return &SessionLimit{sl}, nil
}

// Acquire takes a slot for a new session of tenant (nil: unknown, only the
// instance's bound applies). It returns the slot's release, to be called
// once the session is gone (calling it again does nothing), or a counted
// refusal.
func (l *SessionLimit) Acquire(tenant *string) (release func(), ref *Refusal) {
	if l == nil {
		return func() {}, nil
	}
	return l.acquire(tenant, 0)
}

// sessionsError is a refusal's one line when its reason is
// ReasonMCPSessions.
func (r *Refusal) sessionsError() string {
	who, key := "this instance already holds", "http.mcp.max_sessions"
	if r.Tenant != nil {
		who, key = fmt.Sprintf("tenant %q already has", *r.Tenant), "http.mcp.max_sessions_per_tenant"
	}
	return fmt.Sprintf("overloaded (mcp_sessions): %s %d MCP sessions open here, its %s; close one you no longer use (DELETE /mcp with its Mcp-Session-Id) and retry in %s, or speak the stateless revision 2026-07-28, which opens none",
		who, r.Waiting, key, r.RetryAfter)
}
