package config

import (
	"fmt"
	"sort"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// TopicPlan is one topic Switchboard uses and how it should be set up.
type TopicPlan struct {
	Name              string
	Role              string // "requests", "agents.echo", …
	IntentKeyed       bool   // must share topics.partitions
	Partitions        int
	ReplicationFactor int
	Compact           bool
	RetentionMs       int64 // for delete-policy topics
	MaxMessageBytes   int
}

// Configs returns the topic-level settings of p, as Kafka names them.
func (p TopicPlan) Configs() map[string]string {
	m := map[string]string{"max.message.bytes": strconv.Itoa(p.MaxMessageBytes)}
	if p.Compact {
		m["cleanup.policy"] = "compact"
	} else {
		m["cleanup.policy"] = "delete"
		m["retention.ms"] = strconv.FormatInt(p.RetentionMs, 10)
	}
	return m
}

// TopicPlans lists every topic the configuration uses, in a stable order.
func (c *Config) TopicPlans() []TopicPlan {
	t := c.Topics
	base := func(name, role string, keyed, compact bool) TopicPlan {
		p := TopicPlan{
			Name: name, Role: role, IntentKeyed: keyed, Partitions: t.Partitions, ReplicationFactor: t.ReplicationFactor,
			Compact: compact, RetentionMs: t.Retention.D().Milliseconds(), MaxMessageBytes: t.MaxMessageBytes,
		}
		if o := t.Overrides[name]; o != nil {
			if o.Partitions > 0 {
				p.Partitions = o.Partitions
			}
			if o.ReplicationFactor > 0 {
				p.ReplicationFactor = o.ReplicationFactor
			}
			if o.Retention > 0 {
				p.RetentionMs = o.Retention.D().Milliseconds()
			}
			if o.MaxMessageBytes > 0 {
				p.MaxMessageBytes = o.MaxMessageBytes
			}
		}
		return p
	}
	plans := []TopicPlan{
		base(t.Requests, "requests", true, false),
		base(t.Responses, "responses", true, false),
		base(t.Results, "results", true, false),
		base(t.Timeouts, "timeouts", true, false),
		base(t.Pending, "pending", true, true),
		base(t.DeadLetter, "dead_letter", false, false),
		base(t.FallbackCache, "fallback_cache", false, true),
		base(t.ContextSnapshots, "context_snapshots", false, true),
	}
	names := make([]string, 0, len(c.Agents))
	for n := range c.Agents {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		plans = append(plans, base(c.Agents[n].Topic, "agents."+n, true, false))
	}
	return plans
}

// validateOverrides refuses overrides that would break co-partitioning or
// name a topic Switchboard does not use.
func (c *Config) validateOverrides(root *yaml.Node) Errors {
	var errs Errors
	if len(c.Topics.Overrides) == 0 {
		return nil
	}
	plans := map[string]TopicPlan{}
	for _, p := range c.TopicPlans() {
		plans[p.Name] = p
	}
	for name, o := range c.Topics.Overrides {
		path := []string{"topics", "overrides", name}
		p, ok := plans[name]
		if !ok || o == nil {
			errs = append(errs, &Error{File: c.file, Line: lineOf(root, path...), Key: "topics.overrides." + name, Msg: fmt.Sprintf("%q is not a topic this configuration uses", name)})
			continue
		}
		if p.IntentKeyed && o.Partitions > 0 && o.Partitions != c.Topics.Partitions {
			errs = append(errs, &Error{
				File: c.file, Line: lineOf(root, append(path, "partitions")...), Key: "topics.overrides." + name + ".partitions",
				Msg: fmt.Sprintf("%s is intent-keyed: it must have topics.partitions (%d) partitions like the other intent-keyed topics, so that requests and responses are co-partitioned", name, c.Topics.Partitions),
			})
		}
	}
	return errs
}
