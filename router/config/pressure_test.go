package config_test

import (
	"strings"
	"testing"
	"time"
)

func TestPressureSettingsDefaultsAndErrors(t *testing.T) {
	c, err := parse(t, `
agents:
  a:
    max_in_flight: 4
    rate: 2.5
    queue_limit: 10
    circuit_breaker: {consecutive_failures: 3}
  b: {}
intents:
  e:
    agent: a
    idle_timeout: 200ms
    retry: {max_retries: 2}
  f: {agent: b}
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := c.Agents["a"]
	if a.MaxInFlight != 4 || a.Rate != 2.5 || a.QueueLimit != 10 {
		t.Fatalf("admission %+v", a)
	}
	cb := a.CircuitBreaker
	if cb.ConsecutiveFailures != 3 || cb.Window.D() != 10*time.Second || cb.MinRequests != 10 || cb.OpenFor.D() != 5*time.Second || cb.HalfOpenProbes != 1 {
		t.Fatalf("breaker defaults %+v", cb)
	}
	if b := c.Agents["b"]; b.MaxInFlight != 0 || b.Rate != 0 || b.QueueLimit != 0 || b.CircuitBreaker != nil {
		t.Fatalf("unlimited by default: %+v", b)
	}
	if o := c.Agents["b"].Overload; !o.ShedsLate() || !o.Adapts() || o.MinInFlight != 1 {
		t.Fatalf("overload defaults %+v: want late shedding and the adaptive limit on, min_in_flight 1", o)
	}
	e := c.Intents["e"]
	if e.IdleTimeout.D() != 200*time.Millisecond || e.Retry.MaxRetries != 2 || e.Retry.Backoff.D() != 100*time.Millisecond || e.Retry.MaxBackoff.D() != 5*time.Second {
		t.Fatalf("intent %+v retry %+v", e, e.Retry)
	}
	if c.Intents["f"].Retry != nil || c.Intents["f"].IdleTimeout != 0 {
		t.Fatal("no retries or idle timeout by default")
	}

	for _, tc := range []struct{ name, yaml, want string }{
		{"negative in flight", "agents:\n  a:\n    max_in_flight: -1\nintents: {e: {agent: a}}\n", `sb.yaml:3: agents.a.max_in_flight: must be 0`},
		{"negative rate", "agents:\n  a:\n    rate: -2\nintents: {e: {agent: a}}\n", `sb.yaml:3: agents.a.rate: must be 0`},
		{"breaker without rule", "agents:\n  a:\n    circuit_breaker: {open_for: 1s}\nintents: {e: {agent: a}}\n", `sb.yaml:3: agents.a.circuit_breaker: set consecutive_failures, error_rate or both`},
		{"rate above one", "agents:\n  a:\n    circuit_breaker:\n      error_rate: 50\nintents: {e: {agent: a}}\n", `sb.yaml:4: agents.a.circuit_breaker.error_rate: 50 is not a share`},
		{"backoff above max", "agents: {a: {}}\nintents:\n  e:\n    agent: a\n    retry:\n      backoff: 2s\n      max_backoff: 1s\n", `sb.yaml:7: intents.e.retry.max_backoff: 1s is less than backoff 2s`},
		{"retry without max_retries", "agents: {a: {}}\nintents:\n  e:\n    agent: a\n    retry:\n      backoff: 2s\n", `sb.yaml:5: intents.e.retry.max_retries: must be at least 1`},
		{"NaN rate", "agents:\n  a:\n    rate: .nan\nintents: {e: {agent: a}}\n", `sb.yaml:3: agents.a.rate: must be 0`},
		{"infinite rate", "agents:\n  a:\n    rate: .inf\nintents: {e: {agent: a}}\n", `sb.yaml:3: agents.a.rate: must be 0`},
		{"NaN error rate", "agents:\n  a:\n    circuit_breaker:\n      error_rate: .nan\nintents: {e: {agent: a}}\n", `sb.yaml:4: agents.a.circuit_breaker.error_rate: NaN is not a share`},
		{"min in flight negative", "agents:\n  a:\n    overload:\n      min_in_flight: -1\nintents: {e: {agent: a}}\n", `sb.yaml:4: agents.a.overload.min_in_flight: must be at least 1`},
		{"min in flight above max", "agents:\n  a:\n    max_in_flight: 2\n    overload:\n      min_in_flight: 3\nintents: {e: {agent: a}}\n", `sb.yaml:5: agents.a.overload.min_in_flight: 3 is more than max_in_flight (2)`},
		{"shed_late not a bool", "agents:\n  a:\n    overload:\n      shed_late: sometimes\nintents: {e: {agent: a}}\n", `sb.yaml:4: agents.a.overload.shed_late:`},
		{"unknown overload key", "agents:\n  a:\n    overload:\n      shed: true\nintents: {e: {agent: a}}\n", `sb.yaml:4: agents.a.overload.shed: unknown key "shed"`},
		{"unknown retry key", "agents: {a: {}}\nintents:\n  e:\n    agent: a\n    retry:\n      tries: 2\n", `sb.yaml:6: intents.e.retry.tries: unknown key "tries"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.yaml, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error:\n%v\nwant it to contain:\n%s", err, tc.want)
			}
		})
	}
}
