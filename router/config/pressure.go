package config

import (
	"fmt"
	"math"
)

// CircuitBreaker opens an agent's circuit after consecutive failures or a
// high error rate: while it is open, intents for the agent resolve at once
// with their fallback (outcome circuit_open) and nothing is dispatched.
// After OpenFor it lets HalfOpenProbes intents through; if they all succeed
// it closes, if one fails it opens again. A failure is an error response or a
// dispatched intent that timed out.
type CircuitBreaker struct {
	// ConsecutiveFailures opens the circuit after this many failures in a
	// row. Zero: not this rule.
	ConsecutiveFailures int `yaml:"consecutive_failures"`
	// ErrorRate (0 < rate <= 1) opens the circuit when this share of the
	// outcomes over Window were failures, once there were at least
	// MinRequests of them. Zero: not this rule.
	ErrorRate float64 `yaml:"error_rate"`
	// Window of the error rate. Default 10s.
	Window Duration `yaml:"window"`
	// MinRequests before the error rate counts. Default 10.
	MinRequests int `yaml:"min_requests"`
	// OpenFor is how long the circuit stays open before probing. Default 5s.
	OpenFor Duration `yaml:"open_for"`
	// HalfOpenProbes is how many intents are let through to probe a
	// half-open circuit. Default 1.
	HalfOpenProbes int `yaml:"half_open_probes"`
}

// Retry says how an intent whose agent answered with a retryable error is
// dispatched again: after Backoff, doubling each time up to MaxBackoff, with
// jitter (a delay d is drawn from [d/2, d]), while the deadline allows.
type Retry struct {
	// MaxRetries is how many times an intent is dispatched again at most.
	MaxRetries int `yaml:"max_retries"`
	// Backoff before the first retry. Default 100ms.
	Backoff Duration `yaml:"backoff"`
	// MaxBackoff caps the delay. Default 5s.
	MaxBackoff Duration `yaml:"max_backoff"`
}

func (c *Config) setPressureDefaults() {
	for _, a := range c.Agents {
		if cb := a.CircuitBreaker; cb != nil {
			if cb.Window == 0 {
				cb.Window = Duration(10e9)
			}
			if cb.MinRequests == 0 {
				cb.MinRequests = 10
			}
			if cb.OpenFor == 0 {
				cb.OpenFor = Duration(5e9)
			}
			if cb.HalfOpenProbes == 0 {
				cb.HalfOpenProbes = 1
			}
		}
	}
	for _, it := range c.Intents {
		if r := it.Retry; r != nil {
			if r.Backoff == 0 {
				r.Backoff = Duration(100e6)
			}
			if r.MaxBackoff == 0 {
				r.MaxBackoff = Duration(5e9)
			}
		}
	}
}

// validatePressure checks the admission, breaker, retry and idle settings.
func (c *Config) validatePressure(add func(msg string, path ...string)) {
	for name, a := range c.Agents {
		if a.MaxInFlight < 0 {
			add("must be 0 (no bound) or more", "agents", name, "max_in_flight")
		}
		if a.Rate < 0 || !finite(a.Rate) {
			add("must be 0 (no bound) or more dispatches per second", "agents", name, "rate")
		}
		if a.QueueLimit < 0 {
			add("must be 0 (no bound) or more", "agents", name, "queue_limit")
		}
		cb := a.CircuitBreaker
		if cb == nil {
			continue
		}
		if cb.ConsecutiveFailures < 0 {
			add("must be 0 (off) or more", "agents", name, "circuit_breaker", "consecutive_failures")
		}
		if cb.ErrorRate < 0 || cb.ErrorRate > 1 || !finite(cb.ErrorRate) {
			add(fmt.Sprintf("%g is not a share: use a number above 0 and at most 1, e.g. 0.5", cb.ErrorRate), "agents", name, "circuit_breaker", "error_rate")
		}
		if cb.ConsecutiveFailures == 0 && cb.ErrorRate == 0 {
			add("set consecutive_failures, error_rate or both: the breaker has no rule to open on", "agents", name, "circuit_breaker")
		}
		if cb.MinRequests < 1 {
			add("must be at least 1", "agents", name, "circuit_breaker", "min_requests")
		}
		if cb.HalfOpenProbes < 1 {
			add("must be at least 1", "agents", name, "circuit_breaker", "half_open_probes")
		}
		if cb.Window.D() < c.Router.Tick.D() {
			add(fmt.Sprintf("must be at least router.tick (%s)", c.Router.Tick), "agents", name, "circuit_breaker", "window")
		}
	}
	for name, it := range c.Intents {
		if it.IdleTimeout > 0 && it.IdleTimeout.D() < c.Router.Tick.D() {
			add(fmt.Sprintf("must be at least router.tick (%s)", c.Router.Tick), "intents", name, "idle_timeout")
		}
		r := it.Retry
		if r == nil {
			continue
		}
		if r.MaxRetries < 1 {
			// Zero (or absent) would turn retries off behind a retry block.
			add("must be at least 1 (leave retry out for no retries)", "intents", name, "retry", "max_retries")
		}
		if r.MaxBackoff < r.Backoff {
			add(fmt.Sprintf("%s is less than backoff %s", r.MaxBackoff, r.Backoff), "intents", name, "retry", "max_backoff")
		}
	}
}

// finite reports whether f is a number: not NaN (YAML .nan) nor infinite.
func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
