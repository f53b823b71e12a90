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
	c.setOverloadDefaults()
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
	c.validateOverload(add)
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

// Overload is how an agent's intents degrade when they arrive faster than
// the agent (or the router) answers them: an intent that can no longer be
// answered in time is resolved at once with its fallback instead of being
// dispatched to time out, and the intents the agent is given shrink while
// they time out.
type Overload struct {
	// ShedLate resolves an intent shed (reason shed, with its fallback)
	// rather than dispatching it, when the time it already waited plus the
	// agent's recent answer latency leaves no room before its deadline.
	// Default true.
	ShedLate *bool `yaml:"shed_late"`
	// AdaptiveInFlight lowers the intents in flight to the agent while
	// dispatched intents time out (halved at most once per round trip) and
	// raises it again with answers in time (by one per limit's worth of
	// answers), never above max_in_flight. Intents beyond it wait in the
	// queue. Default true.
	AdaptiveInFlight *bool `yaml:"adaptive_in_flight"`
	// MinInFlight is the lowest the adaptive limit goes. Default 1; at most
	// max_in_flight when that is set.
	MinInFlight int `yaml:"min_in_flight"`
}

// ShedsLate reports whether late intents are shed (on unless shed_late: false).
func (o *Overload) ShedsLate() bool { return o.ShedLate == nil || *o.ShedLate }

// Adapts reports whether the in-flight limit adapts (on unless
// adaptive_in_flight: false).
func (o *Overload) Adapts() bool { return o.AdaptiveInFlight == nil || *o.AdaptiveInFlight }

func (c *Config) setOverloadDefaults() {
	for _, a := range c.Agents {
		if a.Overload.MinInFlight == 0 {
			a.Overload.MinInFlight = 1
		}
	}
}

func (c *Config) validateOverload(add func(msg string, path ...string)) {
	for name, a := range c.Agents {
		switch o := a.Overload; {
		case o.MinInFlight < 1:
			add("must be at least 1", "agents", name, "overload", "min_in_flight")
		case a.MaxInFlight > 0 && o.MinInFlight > a.MaxInFlight:
			add(fmt.Sprintf("%d is more than max_in_flight (%d)", o.MinInFlight, a.MaxInFlight), "agents", name, "overload", "min_in_flight")
		}
	}
}
