package config

import "fmt"

// Byte budgets of the router's pending table (see router/budget.go).
const (
	// DefaultMaxPendingBytes is router.max_pending_bytes: 256 MiB.
	DefaultMaxPendingBytes = 256 << 20
	// DefaultMaxPendingBytesPerTenant is router.max_pending_bytes_per_tenant:
	// 64 MiB, a quarter of the total, so that no one tenant reaches it.
	DefaultMaxPendingBytesPerTenant = 64 << 20
	// minPendingBytes is the least either budget may be: two intents of the
	// largest payload (1 MiB) and their fields.
	minPendingBytes = 2 << 20
)

func (c *Config) setBudgetDefaults() {
	if c.Router.MaxPendingBytes == 0 {
		c.Router.MaxPendingBytes = DefaultMaxPendingBytes
	}
	if c.Router.MaxPendingBytesPerTenant == 0 {
		c.Router.MaxPendingBytesPerTenant = min(DefaultMaxPendingBytesPerTenant, c.Router.MaxPendingBytes)
	}
}

func (c *Config) validateBudget(add func(msg string, path ...string)) {
	r := c.Router
	if r.MemoryLimitBytes < 0 {
		add(fmt.Sprintf("%d bytes: must not be negative (0 or absent: derived from the byte budgets)", r.MemoryLimitBytes), "router", "memory_limit_bytes")
	}
	if r.MaxPendingBytes < minPendingBytes {
		add(fmt.Sprintf("%d bytes is less than %d, two intents of the largest payload", r.MaxPendingBytes, minPendingBytes), "router", "max_pending_bytes")
	}
	switch {
	case r.MaxPendingBytesPerTenant < minPendingBytes:
		add(fmt.Sprintf("%d bytes is less than %d, two intents of the largest payload", r.MaxPendingBytesPerTenant, minPendingBytes), "router", "max_pending_bytes_per_tenant")
	case r.MaxPendingBytesPerTenant > r.MaxPendingBytes:
		add(fmt.Sprintf("%d bytes is more than router.max_pending_bytes (%d): one tenant could pause every tenant", r.MaxPendingBytesPerTenant, r.MaxPendingBytes), "router", "max_pending_bytes_per_tenant")
	}
}
