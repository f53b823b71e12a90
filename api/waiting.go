package api

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxWaiting is the default of WaitLimitConfig.Max (http.max_waiting;
// the README's "HTTP limits" says why); MaxPerTenant's is half of Max.
const DefaultMaxWaiting = 4096

// DefaultMaxWaitingBytes is the default of WaitLimitConfig.MaxBytes
// (http.max_waiting_bytes): what waiting callers' requests may hold on one
// instance, a quarter of the 1 GiB that 4,096 callers of 256 KiB (a
// quarter of http.max_body_bytes) would; MaxBytesPerTenant's is half of
// MaxBytes.
const DefaultMaxWaitingBytes = 256 << 20

// ReasonWaiting is the reason of a refusal by the [WaitLimit]: this
// instance (or the caller's tenant on it) already holds as many callers
// waiting for results as it may.
const ReasonWaiting = "waiting"

// waitingRetryAfter is the Retry-After of a refusal for waiting: slots
// free as fast as results come back, so a second is enough to try again.
const waitingRetryAfter = time.Second

// WaitLimitConfig bounds the callers that wait for a result on one
// instance: POST /v1/intents?wait and ?stream=sse, and MCP tools/call.
// Zero values take the defaults.
type WaitLimitConfig struct {
	// Max bounds all of them.
	Max int
	// MaxPerTenant bounds one tenant's (authenticated callers only: without
	// authentication a caller names any tenant it likes), at most Max.
	MaxPerTenant int
	// MaxBytes bounds the bytes their requests hold while they wait (the
	// intent's payload; an MCP call's arguments twice, raw and parsed),
	// MaxBytesPerTenant one tenant's, at most MaxBytes. One caller of any
	// size is let in when none (of the tenant) waits.
	MaxBytes, MaxBytesPerTenant int64
}

// WaitLimit counts the callers waiting for a result on one instance and
// refuses one more over its bounds (HTTP 503 overloaded, an MCP tool
// error; reason "waiting") before anything is published. Every waiting
// caller holds a goroutine, a socket and a waiter until its result, its
// wait's end or its going away; the bound keeps that from growing until
// the process runs out of descriptors. A nil *WaitLimit bounds nothing.
// It is safe for concurrent use; the HTTP API and the MCP endpoint of one
// instance share one.
type WaitLimit struct{ *slots }

// NewWaitLimit returns a WaitLimit of cfg with its metrics registered with
// reg: the gauge switchboard_api_waiting_callers and the reason "waiting"
// of switchboard_api_admission_refused_total (shared with [Admission]).
func NewWaitLimit(cfg WaitLimitConfig, reg prometheus.Registerer) (*WaitLimit, error) {
	if cfg.Max == 0 {
		cfg.Max = DefaultMaxWaiting
	}
	if cfg.MaxPerTenant == 0 {
		cfg.MaxPerTenant = max(1, cfg.Max/2)
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultMaxWaitingBytes
	}
	if cfg.MaxBytesPerTenant == 0 {
		cfg.MaxBytesPerTenant = max(1, cfg.MaxBytes/2)
	}
	switch {
	case reg == nil:
		return nil, fmt.Errorf("%w: NewWaitLimit needs a registerer", ErrInvalidConfig)
	case cfg.Max < 0 || cfg.MaxPerTenant < 0 || cfg.MaxPerTenant > cfg.Max:
		return nil, fmt.Errorf("%w: the waiting bounds must be positive, a tenant's at most the instance's (%d, %d per tenant)", ErrInvalidConfig, cfg.Max, cfg.MaxPerTenant)
	case cfg.MaxBytes < 0 || cfg.MaxBytesPerTenant < 0 || cfg.MaxBytesPerTenant > cfg.MaxBytes:
		return nil, fmt.Errorf("%w: the waiting byte bounds must be positive, a tenant's at most the instance's (%d, %d per tenant)", ErrInvalidConfig, cfg.MaxBytes, cfg.MaxBytesPerTenant)
	}
	sl, err := newSlots(ReasonWaiting, cfg.Max, cfg.MaxPerTenant, prometheus.GaugeOpts{
		Name: "switchboard_api_waiting_callers",
		Help: "Callers waiting for a result on this instance: POST /v1/intents?wait and ?stream=sse, MCP tools/call and tasks/result (bounded by http.max_waiting).",
	}, reg)
	if err != nil {
		return nil, err
	}
	if err := sl.boundBytes(cfg.MaxBytes, cfg.MaxBytesPerTenant, prometheus.GaugeOpts{
		Name: "switchboard_api_waiting_bytes",
		Help: "Bytes the requests of the callers waiting on this instance hold: intents' payloads, MCP calls' arguments twice (bounded by http.max_waiting_bytes).",
	}, reg); err != nil {
		return nil, err
	}
	return &WaitLimit{sl}, nil
}

// Acquire takes a slot for a caller of tenant (nil: unknown, only the
// instance's bounds apply) whose request holds size bytes while it waits.
// It returns the slot's release, which must be called once the caller
// stops waiting (calling it again does nothing), or a counted refusal.
func (l *WaitLimit) Acquire(tenant *string, size int64) (release func(), ref *Refusal) {
	if l == nil {
		return func() {}, nil
	}
	return l.acquire(tenant, size)
}

// waitingError is a refusal's one line when its reason is ReasonWaiting.
func (r *Refusal) waitingError() string {
	return fmt.Sprintf("overloaded (waiting): %s; nothing was published, retry in %s (or do not wait: POST without ?wait, or call the tool as a task, and fetch the result later)",
		r.WaitingBound(), r.RetryAfter)
}

// WaitingBound says which bound a refusal for waiting reached: the
// callers' count or their bytes, the instance's or the caller's tenant's
// (never anything of another tenant's).
func (r *Refusal) WaitingBound() string {
	if r.ByteLimit > 0 {
		who, key := "the callers waiting here hold", "http.max_waiting_bytes"
		if r.Tenant != nil {
			who, key = fmt.Sprintf("tenant %q's callers waiting here hold", *r.Tenant), "http.max_waiting_bytes_per_tenant"
		}
		return fmt.Sprintf("%s %d bytes of requests, and this one's %d would pass its %s, %d", who, r.HeldBytes, r.Bytes, key, r.ByteLimit)
	}
	who, key := "this instance already holds", "http.max_waiting"
	if r.Tenant != nil {
		who, key = fmt.Sprintf("tenant %q already has", *r.Tenant), "http.max_waiting_per_tenant"
	}
	return fmt.Sprintf("%s %d callers waiting for results here, its %s", who, r.Waiting, key)
}

// refusedCounter registers switchboard_api_admission_refused_total with
// reg, or returns the one already registered there: admission and the
// wait limit count in one metric, by reason.
func refusedCounter(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_api_admission_refused_total",
		Help: "Requests refused before anything was published or held (HTTP 503, MCP tool or JSON-RPC error), by reason: router_backlog or agent_backlog, the larger of the two waits when the backlog in front of an intent would most likely outlast its timeout (http.admission); waiting, when this instance or the caller's tenant already holds http.max_waiting or http.max_waiting_per_tenant callers waiting for results; mcp_sessions, when it already holds http.mcp.max_sessions or max_sessions_per_tenant MCP sessions; stream_connections, when it already holds http.websocket.max_connections streams; reading, when the bodies being read already hold http.max_reading_bytes or max_reading_bytes_per_tenant (the body is not read); connections, a connection closed unanswered because the listener already holds http.max_connections.",
	}, []string{"reason"})
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
			return existing, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("api: register admission metrics: %w", err)
	}
	return c, nil
}
