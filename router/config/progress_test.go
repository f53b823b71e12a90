package config_test

import (
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/router/config"
)

func TestProgressSettingsDefaultsAndErrors(t *testing.T) {
	c, err := parse(t, `
agents: {w: {}}
intents:
  write:
    agent: w
    progress: {max_per_intent: 200, max_bytes: 4096}
  other: {agent: w}
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Intents["write"].Progress; p.MaxPerIntent != 200 || p.MaxBytes != 4096 {
		t.Fatalf("progress %+v", p)
	}
	if p := c.Intents["other"].Progress; p.MaxPerIntent != config.DefaultProgressMaxPerIntent || p.MaxBytes != config.DefaultProgressMaxBytes {
		t.Fatalf("defaults %+v", p)
	}
	if c.Topics.Progress != "mcp.intent.progress" {
		t.Fatalf("topics.progress %q", c.Topics.Progress)
	}
	var plan *config.TopicPlan
	for _, p := range c.TopicPlans() {
		if p.Name == "mcp.intent.progress" {
			plan = &p
		}
	}
	if plan == nil || !plan.IntentKeyed || plan.Compact || plan.Partitions != c.Topics.Partitions {
		t.Fatalf("progress topic plan %+v", plan)
	}

	for _, tc := range []struct{ name, yaml, want string }{
		{"negative count", "agents: {w: {}}\nintents:\n  e:\n    agent: w\n    progress:\n      max_per_intent: -1\n", `sb.yaml:6: intents.e.progress.max_per_intent: -1: must be at least 1`},
		{"negative bytes", "agents: {w: {}}\nintents:\n  e:\n    agent: w\n    progress:\n      max_bytes: -5\n", `sb.yaml:6: intents.e.progress.max_bytes: -5: must be at least 1`},
		{"unknown key", "agents: {w: {}}\nintents:\n  e:\n    agent: w\n    progress:\n      max_chunks: 5\n", `sb.yaml:6: intents.e.progress.max_chunks: unknown key`},
		{"same topic as results", "topics:\n  progress: mcp.intent.result\nagents: {w: {}}\nintents: {e: {agent: w}}\n", `topics.progress: topic "mcp.intent.result" is also topics.results`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.yaml, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error:\n%v\nwant it to contain:\n%s", err, tc.want)
			}
		})
	}
}
