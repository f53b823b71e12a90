package api

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// slots counts holds of one kind (callers waiting, MCP sessions) on one
// instance, in all and by tenant, and, when it has byte bounds, the bytes
// they hold; it refuses one more over any bound with a counted [Refusal]
// of its reason. A byte bound never refuses a hold when none of its scope
// (the instance, or the tenant) is held: one hold of any size is let in.
type slots struct {
	max, perTenant           int
	maxBytes, perTenantBytes int64 // 0: no byte bound
	reason                   string
	held                     prometheus.Gauge
	heldBytes                prometheus.Gauge // nil without byte bounds
	refused                  prometheus.Counter

	mu          sync.Mutex
	n           int
	bytes       int64
	tenants     map[string]int
	tenantBytes map[string]int64
}

// newSlots returns slots of reason bounded by max and perTenant, with the
// gauge registered with reg and the reason's refusals counted in
// switchboard_api_admission_refused_total.
func newSlots(reason string, max, perTenant int, gauge prometheus.GaugeOpts, reg prometheus.Registerer) (*slots, error) {
	refused, err := refusedCounter(reg)
	if err != nil {
		return nil, err
	}
	s := &slots{
		max: max, perTenant: perTenant, reason: reason, tenants: map[string]int{}, tenantBytes: map[string]int64{},
		refused: refused.WithLabelValues(reason), held: prometheus.NewGauge(gauge),
	}
	if err := reg.Register(s.held); err != nil {
		return nil, fmt.Errorf("api: register %s metrics: %w", reason, err)
	}
	return s, nil
}

// boundBytes adds byte bounds, with their gauge registered with reg.
func (s *slots) boundBytes(max, perTenant int64, gauge prometheus.GaugeOpts, reg prometheus.Registerer) error {
	s.maxBytes, s.perTenantBytes, s.heldBytes = max, perTenant, prometheus.NewGauge(gauge)
	if err := reg.Register(s.heldBytes); err != nil {
		return fmt.Errorf("api: register %s metrics: %w", s.reason, err)
	}
	return nil
}

// acquire takes a slot holding size bytes for tenant (nil: unknown, only
// the instance's bounds apply), or returns the counted refusal.
func (s *slots) acquire(tenant *string, size int64) (release func(), ref *Refusal) {
	size = max(size, 0)
	s.mu.Lock()
	t := ""
	if tenant != nil {
		t = *tenant
	}
	switch {
	case s.n >= s.max:
		ref = &Refusal{Reason: s.reason, Waiting: s.n, Limit: s.max}
	case tenant != nil && s.tenants[t] >= s.perTenant:
		ref = &Refusal{Reason: s.reason, Waiting: s.tenants[t], Limit: s.perTenant, Tenant: tenant}
	case s.maxBytes > 0 && s.n > 0 && s.bytes+size > s.maxBytes:
		ref = &Refusal{Reason: s.reason, Waiting: s.n, HeldBytes: s.bytes, Bytes: size, ByteLimit: s.maxBytes}
	case tenant != nil && s.perTenantBytes > 0 && s.tenants[t] > 0 && s.tenantBytes[t]+size > s.perTenantBytes:
		ref = &Refusal{Reason: s.reason, Waiting: s.tenants[t], HeldBytes: s.tenantBytes[t], Bytes: size, ByteLimit: s.perTenantBytes, Tenant: tenant}
	default:
		s.n++
		s.bytes += size
		if tenant != nil {
			s.tenants[t]++
			s.tenantBytes[t] += size
		}
	}
	s.mu.Unlock()
	if ref != nil {
		ref.RetryAfter = waitingRetryAfter
		s.refused.Inc()
		return nil, ref
	}
	s.held.Inc()
	if s.heldBytes != nil {
		s.heldBytes.Add(float64(size))
	}
	return sync.OnceFunc(func() { s.release(tenant, size) }), nil
}

func (s *slots) release(tenant *string, size int64) {
	s.mu.Lock()
	s.n--
	s.bytes -= size
	if tenant != nil {
		t := *tenant
		if s.tenants[t]--; s.tenants[t] <= 0 {
			delete(s.tenants, t)
			delete(s.tenantBytes, t)
		} else {
			s.tenantBytes[t] -= size
		}
	}
	s.mu.Unlock()
	s.held.Dec()
	if s.heldBytes != nil {
		s.heldBytes.Sub(float64(size))
	}
}
