package config

import (
	"fmt"
	"sort"
	"strings"
)

// ACL is one allow rule that Kafka's authorizer needs for a Switchboard
// principal, in Kafka's words (AclCommand, the admin API). Operations
// Read and Write imply Describe, so a rule for Describe appears only where
// nothing else is granted.
type ACL struct {
	Principal    string // "User:router"
	ResourceType string // Topic, Group, TransactionalId
	PatternType  string // Literal or Prefixed
	Name         string
	Operation    string // Read, Write, Describe, DescribeConfigs, Create
	Why          string // what of Switchboard's needs it
}

// Resource types, pattern types and operations, as Kafka names them.
const (
	ACLTopic           = "Topic"
	ACLGroup           = "Group"
	ACLTransactionalID = "TransactionalId"
	ACLLiteral         = "Literal"
	ACLPrefixed        = "Prefixed"
	ACLRead            = "Read"
	ACLWrite           = "Write"
	ACLDescribe        = "Describe"
	ACLDescribeConfigs = "DescribeConfigs"
	ACLCreate          = "Create"
)

// Principals names the Kafka principals ("User:name") of Switchboard's
// parts. An empty one gets no ACLs.
type Principals struct {
	// Router is the principal of 'switchboard serve''s router: its consumer
	// group, its topics, its transactional ids, the agents' lag.
	Router string
	// API is the principal of the API side: 'serve''s HTTP and MCP doors
	// and the command line's send, cancel and tail (intents in, results and
	// timeout events out). 'serve' runs the router and the API in one
	// process with one principal: give it both.
	API string
	// Agents maps an agent's name to its principal: it reads its own
	// request topic in its own group, and writes responses.
	Agents map[string]string
	// Instances are the router instances' ids (router.instance_id), for
	// literal transactional ids; none: one prefixed rule for the group.
	Instances []string
}

// ACLs lists the allow rules the principals need on the cluster, each once,
// in a stable order. It is what 'switchboard topics acls' prints and
// applies; anything else stays denied.
func (c *Config) ACLs(p Principals) ([]ACL, error) {
	var out []ACL
	seen := map[ACL]bool{}
	add := func(principal, rtype, pattern, name, op, why string) {
		a := ACL{Principal: principal, ResourceType: rtype, PatternType: pattern, Name: name, Operation: op}
		if seen[a] {
			return
		}
		seen[a] = true
		a.Why = why
		out = append(out, a)
	}
	for _, pr := range append([]string{p.Router, p.API}, agentPrincipals(p.Agents)...) {
		if pr != "" && !strings.Contains(pr, ":") {
			return nil, fmt.Errorf("config: principal %q: want type:name, e.g. User:router", pr)
		}
	}
	t := c.Topics
	topic := func(pr, name, op, why string) { add(pr, ACLTopic, ACLLiteral, name, op, why) }
	agentNames := make([]string, 0, len(c.Agents))
	for n := range c.Agents {
		agentNames = append(agentNames, n)
	}
	sort.Strings(agentNames)

	if r := p.Router; r != "" {
		add(r, ACLGroup, ACLLiteral, c.Kafka.GroupID, ACLRead, "the router's consumer group (kafka.group_id)")
		for _, name := range []string{t.Requests, t.Responses} {
			topic(r, name, ACLRead, "the router consumes it")
			topic(r, name, ACLWrite, "the router moves a record produced to the wrong partition")
		}
		topic(r, t.Pending, ACLRead, "restoring pending intents on assignment")
		topic(r, t.Pending, ACLWrite, "the pending changelog")
		topic(r, t.FallbackCache, ACLRead, "the fallback cache every instance reads")
		topic(r, t.FallbackCache, ACLWrite, "last good answers")
		topic(r, t.ContextSnapshots, ACLRead, "context snapshots attached to intents")
		for _, name := range []string{t.Results, t.Timeouts, t.DeadLetter} {
			topic(r, name, ACLWrite, "the router's outputs")
		}
		topic(r, t.Progress, ACLWrite, "agents' progress, republished as IntentProgress")
		for _, n := range agentNames {
			a := c.Agents[n]
			topic(r, a.Topic, ACLWrite, "dispatching to agent "+n)
			topic(r, a.Topic, ACLRead, "agent "+n+"'s lag: the oldest unread request's age")
			add(r, ACLGroup, ACLLiteral, a.GroupID, ACLDescribe, "agent "+n+"'s lag: its group's committed offsets")
		}
		for _, plan := range c.TopicPlans() {
			topic(r, plan.Name, ACLDescribeConfigs, "serve checks its topics at start")
			if t.AutoCreate {
				topic(r, plan.Name, ACLCreate, "topics.auto_create")
			}
		}
		if c.Router.Delivery == ExactlyOnce {
			if len(p.Instances) == 0 {
				add(r, ACLTransactionalID, ACLPrefixed, c.Kafka.GroupID+".", ACLWrite,
					"exactly_once: <group_id>.<instance_id> and <group_id>.<instance_id>.b of every instance")
			}
			for _, id := range p.Instances {
				tx := c.Kafka.GroupID + "." + id
				add(r, ACLTransactionalID, ACLLiteral, tx, ACLWrite, "exactly_once: instance "+id+"'s first producer")
				add(r, ACLTransactionalID, ACLLiteral, tx+".b", ACLWrite, "exactly_once: instance "+id+"'s second producer")
			}
		}
	}
	if a := p.API; a != "" {
		topic(a, t.Requests, ACLWrite, "submitting and cancelling intents")
		topic(a, t.Results, ACLRead, "results for callers, streams and resumes")
		topic(a, t.Timeouts, ACLRead, "timeout events for streams and resumes")
		topic(a, t.Progress, ACLRead, "progress for streams, watches and send --follow")
	}
	names := make([]string, 0, len(p.Agents))
	for n := range p.Agents {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		pr := p.Agents[n]
		a := c.Agents[n]
		if pr == "" {
			continue
		}
		if a == nil {
			return nil, fmt.Errorf("config: no agent %q in the configuration (agents are: %s)", n, strings.Join(agentNames, ", "))
		}
		topic(pr, a.Topic, ACLRead, "agent "+n+" reads its requests")
		add(pr, ACLGroup, ACLLiteral, a.GroupID, ACLRead, "agent "+n+"'s consumer group")
		topic(pr, t.Responses, ACLWrite, "agent "+n+" answers")
	}
	return out, nil
}

func agentPrincipals(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	return out
}
