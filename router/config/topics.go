package config

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

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
		base(t.Progress, "progress", true, false),
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

// MaxTopicNameLen is Kafka's limit on a topic name's length.
const MaxTopicNameLen = 249

// checkTopicName applies Kafka's rules for topic names (Topic.validate in
// Kafka's clients): 1 to 249 of a-z, A-Z, 0-9, '.', '_', '-', and not "." or
// "..". A name the broker would refuse is caught at load, with its key.
func checkTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("a topic name must not be empty")
	case name == "." || name == "..":
		return fmt.Errorf("%q is not a topic name Kafka accepts", name)
	case len(name) > MaxTopicNameLen:
		return fmt.Errorf("topic name is %d characters long; Kafka's limit is %d", len(name), MaxTopicNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return fmt.Errorf("%q is not a topic name Kafka accepts: use a-z, A-Z, 0-9, '.', '_' and '-' (%q at byte %d)", name, rune(c), i)
		}
	}
	return nil
}

// validateTopicNames checks every topic the configuration names against
// Kafka's rules, including the one Kafka applies between topics: two names
// that differ only in '.' against '_' collide (their metric names would be
// the same), and the broker refuses to create the second.
func (c *Config) validateTopicNames(root *yaml.Node) Errors {
	var errs Errors
	add := func(msg string, path []string) {
		errs = append(errs, &Error{File: c.file, Line: lineOf(root, path...), Key: strings.Join(path, "."), Msg: msg})
	}
	type named struct {
		name string
		path []string
	}
	var all []named
	for _, p := range c.TopicPlans() {
		path := []string{"topics", p.Role}
		if agent, ok := strings.CutPrefix(p.Role, "agents."); ok {
			path = []string{"agents", agent, "topic"}
		}
		all = append(all, named{p.Name, path})
	}
	if a := c.Contexts.Aggregate; a != nil && a.EventsTopic != "" {
		all = append(all, named{a.EventsTopic, []string{"contexts", "aggregate", "events_topic"}})
	}
	collides := map[string]named{}
	for _, t := range all {
		if err := checkTopicName(t.name); err != nil {
			add(err.Error(), t.path)
			continue
		}
		k := strings.ReplaceAll(t.name, ".", "_")
		if other, ok := collides[k]; ok && other.name != t.name {
			add(fmt.Sprintf("topic %q collides with %q (%s): Kafka treats '.' and '_' alike in topic names and refuses the second", t.name, other.name, strings.Join(other.path, ".")), t.path)
			continue
		}
		collides[k] = t
	}
	return errs
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
		for _, r := range []struct {
			key    string
			v, max int
		}{
			{"partitions", o.Partitions, math.MaxInt32},
			{"replication_factor", o.ReplicationFactor, math.MaxInt16},
			{"max_message_bytes", o.MaxMessageBytes, math.MaxInt32},
		} {
			if r.v < 0 || r.v > r.max {
				errs = append(errs, &Error{
					File: c.file, Line: lineOf(root, append(path, r.key)...), Key: "topics.overrides." + name + "." + r.key,
					Msg: fmt.Sprintf("%d is out of range: 1 to %d (0 or absent keeps the default)", r.v, r.max),
				})
			}
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
