package config_test

import (
	"strings"
	"testing"
	"time"
)

func TestAgentGroupAndLagInterval(t *testing.T) {
	c, err := parse(t, "agents:\n  echo: {}\n  slow: {group_id: slow-workers}\nintents: {e: {agent: echo}}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if g := c.Agents["echo"].GroupID; g != "switchboard-agent-echo" {
		t.Errorf("echo's group = %q, want the Go client's default switchboard-agent-echo", g)
	}
	if g := c.Agents["slow"].GroupID; g != "slow-workers" {
		t.Errorf("slow's group = %q", g)
	}
	if d := c.Router.LagInterval.D(); d != 15*time.Second {
		t.Errorf("router.lag_interval = %s, want 15s", d)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"agents:\n  a:\n    group_id: switchboard-router\nintents: {e: {agent: a}}\n", `sb.yaml:3: agents.a.group_id: "switchboard-router" is the router's group (kafka.group_id)`},
		{"agents: {a: {}}\nintents: {e: {agent: a}}\nrouter:\n  lag_interval: 500ms\n", `sb.yaml:4: router.lag_interval: must be at least 1s`},
	} {
		_, err := parse(t, tc.yaml, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error:\n%v\nwant it to contain:\n%s", err, tc.want)
		}
	}
}

func TestAbortHangingTransactionsDefaultsOn(t *testing.T) {
	for yaml, want := range map[string]bool{
		"": true,
		"router:\n  abort_hanging_transactions: true\n":  true,
		"router:\n  abort_hanging_transactions: false\n": false,
	} {
		c, err := parse(t, "agents: {a: {}}\nintents: {e: {agent: a}}\n"+yaml, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Router.AbortsHangingTransactions(); got != want {
			t.Errorf("%q: AbortsHangingTransactions() = %v, want %v", yaml, got, want)
		}
	}
	if _, err := parse(t, "agents: {a: {}}\nintents: {e: {agent: a}}\nrouter:\n  abort_hanging_transactions: sometimes\n", nil); err == nil {
		t.Error("abort_hanging_transactions: sometimes was accepted")
	}
}
