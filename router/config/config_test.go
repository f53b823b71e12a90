package config_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/router/config"
)

func TestShippedExampleLoads(t *testing.T) {
	c, err := config.Load("../../deploy/examples/switchboard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fc := c.Intents["fraud_check"]
	if fc.Timeout.D() != 300*time.Millisecond || fc.Agent != "slow" {
		t.Fatalf("fraud_check = %+v", fc)
	}
	if fc.Fallback.Cache == nil || fc.Fallback.Cache.MaxAge.D() != 10*time.Minute || fc.Fallback.Cache.Key != config.CacheKeyContextRef {
		t.Fatalf("fraud_check cache fallback = %+v", fc.Fallback.Cache)
	}
	if fc.Fallback.StaticJSON != `{"decision":"review"}` {
		t.Fatalf("static = %s", fc.Fallback.StaticJSON)
	}
	if c.Agents["echo"].Topic != "mcp.agent.echo.request" || c.Agents["echo"].Name != "echo" {
		t.Fatalf("echo agent = %+v", c.Agents["echo"])
	}
	if c.Router.Delivery != config.ExactlyOnce || c.Router.DedupWindow.D() != 10*time.Minute || c.Router.CommitInterval.D() != 100*time.Millisecond {
		t.Fatalf("router defaults = %+v", c.Router)
	}
}

func parse(t *testing.T, y string, env map[string]string) (*config.Config, error) {
	t.Helper()
	return config.Parse("sb.yaml", []byte(y), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
}

func TestErrorsNameFileLineAndKey(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"unknown top key", "kafka: {}\nbogus: 1\nintents: {e: {agent: a}}\nagents: {a: {}}\n", `sb.yaml:2: bogus: unknown key "bogus"`},
		{"unknown nested key", "agents:\n  a:\n    topik: x\nintents:\n  e: {agent: a}\n", `sb.yaml:3: agents.a.topik: unknown key "topik"`},
		{"bad duration", "agents: {a: {}}\nintents:\n  e:\n    agent: a\n    timeout: fast\n", `sb.yaml:5: intents.e.timeout: "fast" is not a duration`},
		{"unknown agent", "agents:\n  echo: {}\nintents:\n  e:\n    agent: ecko\n", `sb.yaml:5: intents.e.agent: unknown agent "ecko" (agents are: echo)`},
		{"owned property", "kafka:\n  properties:\n    enable.auto.commit: \"true\"\nagents: {a: {}}\nintents: {e: {agent: a}}\n", `sb.yaml:3: kafka.properties.enable.auto.commit: "enable.auto.commit" cannot be set here`},
		{"avro without registry", "agents:\n  a: {encoding: avro}\nintents: {e: {agent: a}}\n", `sb.yaml:2: agents.a.encoding: avro needs schema_registry.url`},
		{"bad cache key", "agents: {a: {}}\nintents:\n  e:\n    agent: a\n    fallback:\n      cache: {key: user}\n", `sb.yaml:6: intents.e.fallback.cache.key: "user" is not a cache key`},
		{"no intents", "agents: {a: {}}\n", `sb.yaml: intents: no intent types configured`},
		{"bad delivery", "agents: {a: {}}\nintents: {e: {agent: a}}\nrouter:\n  delivery: maybe_once\n", `sb.yaml:4: router.delivery: "maybe_once" is not a delivery guarantee`},
		{"duplicate topic", "topics:\n  results: mcp.intent.request\nagents: {a: {}}\nintents: {e: {agent: a}}\n", `sb.yaml:2: topics.results: topic "mcp.intent.request" is also topics.requests`},
		{"syntax", "agents: [\n", `sb.yaml:`},
		{"wrong type", "topics:\n  partitions: many\nagents: {a: {}}\nintents: {e: {agent: a}}\n", `sb.yaml:2: topics.partitions: "many" is not a whole number`},
		// A flow mapping puts several keys on one line: the key is still exact.
		{"wrong type in a flow mapping", "agents: {a: {}}\nintents: {e: {agent: a}}\ntopics: {replication_factor: 1, partitions: six}\n", `sb.yaml:3: topics.partitions: "six" is not a whole number`},
		{"wrong type deep", "agents:\n  a: {max_in_flight: 1.5}\nintents: {e: {agent: a}}\n", `sb.yaml:2: agents.a.max_in_flight: "1.5" is not a whole number`},
		{"unknown key in a flow mapping", "agents: {a: {topic: x, encodng: json}}\nintents: {e: {agent: a}}\n", `sb.yaml:1: agents.a.encodng: unknown key "encodng"`},
		{"list for a mapping", "agents: [a]\nintents: {e: {agent: a}}\n", `sb.yaml:1: agents: want a mapping of names, not a list`},
		{"bad duration in a flow mapping", "agents: {a: {}}\nintents: {e: {agent: a, timeout: soon}}\n", `sb.yaml:2: intents.e.timeout: "soon" is not a duration`},
		{"partitions past int32", "topics:\n  partitions: 99999999999\nagents: {a: {}}\nintents: {e: {agent: a}}\n", `sb.yaml:2: topics.partitions: 99999999999 is more than Kafka allows (2147483647)`},
		{"replication past int16", "topics:\n  replication_factor: 40000\nagents: {a: {}}\nintents: {e: {agent: a}}\n", `sb.yaml:2: topics.replication_factor: 40000 is more than Kafka allows (32767)`},
		{"override out of range", "topics:\n  overrides:\n    mcp.intent.dlq:\n      partitions: -3\nagents: {a: {}}\nintents: {e: {agent: a}}\n", `sb.yaml:4: topics.overrides.mcp.intent.dlq.partitions: -3 is out of range`},
		{"second document", "agents: {a: {}}\nintents: {e: {agent: a}}\n---\nrouter: {delivery: at_least_once}\n", `sb.yaml:3: a second YAML document starts here`},
		{"topic with a space", "topics:\n  requests: \"bad topic!\"\nagents: {a: {}}\nintents: {e: {agent: a}}\n", `sb.yaml:2: topics.requests: "bad topic!" is not a topic name Kafka accepts`},
		{"topic dot dot", "topics:\n  results: ..\nagents: {a: {}}\nintents: {e: {agent: a}}\n", `sb.yaml:2: topics.results: ".." is not a topic name Kafka accepts`},
		{"topic too long", "agents:\n  a: {topic: " + strings.Repeat("t", 300) + "}\nintents: {e: {agent: a}}\n", `sb.yaml:2: agents.a.topic: topic name is 300 characters long; Kafka's limit is 249`},
		{"topics colliding", "topics:\n  results: mcp_intent_request\nagents: {a: {}}\nintents: {e: {agent: a}}\n", `sb.yaml:2: topics.results: topic "mcp_intent_request" collides with "mcp.intent.request" (topics.requests)`},
		{"events topic", "agents: {a: {}}\nintents: {e: {agent: a}}\ncontexts:\n  aggregate:\n    events_topic: \"ev/ents\"\n    key_field: user\n    features: {n: {op: count, window: 1m}}\n", `sb.yaml:5: contexts.aggregate.events_topic: "ev/ents" is not a topic name`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.yaml, nil)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error:\n%v\nwant it to contain:\n%s", err, tc.want)
			}
			if !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("errors.Is(err, ErrInvalid) = false for %v", err)
			}
		})
	}
}

func TestEveryMistakeIsReportedAtOnce(t *testing.T) {
	_, err := parse(t, "agents: {a: {encoding: xml}}\nintents:\n  e: {agent: b}\nlog: {level: loud}\n", nil)
	var errs config.Errors
	if !errors.As(err, &errs) || len(errs) != 3 {
		t.Fatalf("want 3 errors, got %v", err)
	}
	if errs[0].Line > errs[1].Line || errs[1].Line > errs[2].Line {
		t.Fatalf("not in file order: %v", err)
	}
}

func TestEnvironmentOverridesTheFile(t *testing.T) {
	c, err := parse(t, "kafka: {bootstrap_servers: a:1}\nagents: {a: {}}\nintents: {e: {agent: a}}\n", map[string]string{
		config.EnvBootstrap:    "b:2",
		config.EnvRegistryURL:  "http://sr:8081",
		config.EnvSASLUsername: "u",
		config.EnvSASLPassword: "p",
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Kafka.BootstrapServers != "b:2" || c.SchemaRegistry.URL != "http://sr:8081" {
		t.Fatalf("overrides not applied: %+v %+v", c.Kafka, c.SchemaRegistry)
	}
	if c.Kafka.Properties["sasl.username"] != "u" || c.Kafka.Properties["sasl.password"] != "p" {
		t.Fatalf("sasl overrides not applied: %v", c.Kafka.Properties)
	}
}

func TestDefaults(t *testing.T) {
	c, err := parse(t, "agents: {summarizer: {}}\nintents: {summarize: {agent: summarizer}}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Agents["summarizer"].Topic; got != "mcp.agent.summarizer.request" {
		t.Errorf("agent topic default = %q", got)
	}
	if got := c.Intents["summarize"].Timeout.D(); got != 30*time.Second {
		t.Errorf("timeout default = %v", got)
	}
	if c.Topics.Requests != config.DefaultRequests || c.Kafka.GroupID != config.DefaultGroupID || c.HTTP.Listen != config.DefaultListen {
		t.Errorf("defaults not applied: %+v", c)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := config.Load("/nonexistent/switchboard.yaml")
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v", err)
	}
}

// Issue 14: demo: false on an agent keeps 'switchboard dev' from answering in
// the user's agent's place; absent, dev runs its demo agent.
func TestAgentDemo(t *testing.T) {
	c, err := parse(t, "agents:\n  mine: {demo: false}\n  echo: {}\n  other: {demo: true}\nintents: {e: {agent: echo}, m: {agent: mine}, o: {agent: other}}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Agents["mine"].RunsDemo() || !c.Agents["echo"].RunsDemo() || !c.Agents["other"].RunsDemo() {
		t.Fatalf("RunsDemo: mine %v, echo %v, other %v", c.Agents["mine"].RunsDemo(), c.Agents["echo"].RunsDemo(), c.Agents["other"].RunsDemo())
	}
	if _, err := parse(t, "agents:\n  a: {demo: maybe}\nintents: {e: {agent: a}}\n", nil); err == nil || !strings.Contains(err.Error(), "sb.yaml:2: agents.a.demo") {
		t.Fatalf("demo: maybe: %v", err)
	}
}
