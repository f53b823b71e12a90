package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/router/config"
)

const contextsYAML = `agents: {a: {}}
intents:
  e: {agent: a, context: attach}
  f: {agent: a, context: attach, context_max_age: 5s}
  g: {agent: a}
contexts:
  max_age: 20s
  publish:
    heartbeat: 3s
    thresholds:
      clicks: {absolute: 2}
      spend: {relative: 0.1}
  aggregate:
    events_topic: events.clicks
    key_field: user.id
    tenant_field: org
    time_field: ts
    allowed_lateness: 30s
    features:
      clicks_5m: {op: count, window: 5m}
      spend_1h: {op: sum, field: amount, window: 1h, hop: 5m}
`

func TestContextsConfig(t *testing.T) {
	c, err := parse(t, contextsYAML, nil)
	if err != nil {
		t.Fatal(err)
	}
	if it := c.Intents["e"]; it.Context != config.ContextAttach || it.ContextMaxAge.D() != 20*time.Second {
		t.Errorf("e = %+v (want attach, max age from contexts.max_age)", it)
	}
	if it := c.Intents["f"]; it.ContextMaxAge.D() != 5*time.Second {
		t.Errorf("f context_max_age = %v", it.ContextMaxAge)
	}
	if c.Intents["g"].Context != config.ContextNone {
		t.Errorf("g attaches context")
	}
	if p := c.Contexts.Publish; p.Heartbeat.D() != 3*time.Second || p.Thresholds["clicks"].Absolute != 2 || p.Thresholds["spend"].Relative != 0.1 {
		t.Errorf("publish = %+v", p)
	}
	a := c.Contexts.Aggregate
	if a == nil || a.KeyField != "user.id" || a.TenantField != "org" || a.AllowedLateness.D() != 30*time.Second {
		t.Fatalf("aggregate = %+v", a)
	}
	if f := a.Features["clicks_5m"]; f.Hop != f.Window {
		t.Errorf("a tumbling window's hop is its length: %+v", f)
	}
	if f := a.Features["spend_1h"]; f.Hop.D() != 5*time.Minute || f.Field != "amount" {
		t.Errorf("spend_1h = %+v", f)
	}

	d, err := parse(t, "agents: {a: {}}\nintents: {e: {agent: a, context: attach}}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Intents["e"].ContextMaxAge.D() != config.DefaultContextMaxAge || d.Contexts.Publish.Heartbeat.D() != 10*time.Second || d.Contexts.Aggregate != nil {
		t.Errorf("defaults: %+v %+v", d.Intents["e"], d.Contexts)
	}
}

func TestContextsConfigErrors(t *testing.T) {
	base := "agents: {a: {}}\nintents:\n  e: {agent: a}\n"
	agg := base + "contexts:\n  aggregate:\n    events_topic: ev\n    key_field: k\n    features:\n"
	cases := []struct{ name, yaml, want string }{
		{"bad mode", "agents: {a: {}}\nintents:\n  e:\n    agent: a\n    context: always\n", `sb.yaml:5: intents.e.context: "always" is not a context mode`},
		{"negative threshold", base + "contexts:\n  publish:\n    thresholds:\n      x: {absolute: -1}\n", `sb.yaml:7: contexts.publish.thresholds.x.absolute: must not be negative`},
		{"NaN threshold", base + "contexts:\n  publish:\n    thresholds:\n      x: {relative: .nan}\n", `sb.yaml:7: contexts.publish.thresholds.x.relative: NaN is not a finite number`},
		{"infinite threshold", base + "contexts:\n  publish:\n    thresholds:\n      x: {absolute: .inf}\n", `sb.yaml:7: contexts.publish.thresholds.x.absolute: +Inf is not a finite number`},
		{"no events topic", base + "contexts:\n  aggregate:\n    key_field: k\n    features: {n: {op: count, window: 1m}}\n", `sb.yaml:5: contexts.aggregate.events_topic: required`},
		{"no key field", base + "contexts:\n  aggregate:\n    events_topic: ev\n    features: {n: {op: count, window: 1m}}\n", `sb.yaml:5: contexts.aggregate.key_field: required`},
		{"bad op", agg + "      n: {op: median, window: 1m}\n", `sb.yaml:9: contexts.aggregate.features.n.op: "median" is not an aggregate`},
		{"sum without field", agg + "      n: {op: sum, window: 1m}\n", `sb.yaml:9: contexts.aggregate.features.n.field: required: sum needs`},
		{"no window", agg + "      n: {op: count}\n", `sb.yaml:9: contexts.aggregate.features.n.window: required`},
		{"hop longer", agg + "      n: {op: count, window: 1m, hop: 2m}\n", `contexts.aggregate.features.n.hop: 2m0s is longer than the window`},
		{"hop not a divisor", agg + "      n: {op: count, window: 1m, hop: 25s}\n", `contexts.aggregate.features.n.hop: the window 1m0s must be a whole number of hops`},
		{"too many windows", agg + "      n: {op: count, window: 1h, hop: 1s}\n", `contexts.aggregate.features.n.hop: 1h0m0s windows every 1s: an event would count in 3600 windows, at most 1000`},
		{"tenant and tenant field", base + "contexts:\n  aggregate:\n    events_topic: ev\n    key_field: k\n    tenant_field: org\n    tenant: acme\n    features: {n: {op: count, window: 1m}}\n", `sb.yaml:9: contexts.aggregate.tenant: give tenant_field or tenant, not both`},
		{"bad tenant", base + "contexts:\n  aggregate:\n    events_topic: ev\n    key_field: k\n    tenant: a b\n    features: {n: {op: count, window: 1m}}\n", `sb.yaml:8: contexts.aggregate.tenant: "a b" is not a tenant`},
		{"unknown key", base + "contexts:\n  maxage: 1s\n", `sb.yaml:5: contexts.maxage: unknown key "maxage"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.yaml, nil)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) || !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("error:\n%v\nwant it to contain:\n%s", err, tc.want)
			}
		})
	}
}
