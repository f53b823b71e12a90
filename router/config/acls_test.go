package config_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/router/config"
)

const aclYAML = `kafka: {group_id: sb}
topics: {requests: req, responses: resp, results: res, timeouts: to, dead_letter: dlq, pending: pend, fallback_cache: fb, context_snapshots: ctx, progress: prog%s}
agents:
  a: {topic: a.req, group_id: ga}
  b: {}
intents: {e: {agent: a}}
router: {delivery: %s}
`

// rules renders ACLs as "principal op type/pattern/name" lines, sorted.
func rules(acls []config.ACL) []string {
	out := make([]string, len(acls))
	for i, a := range acls {
		out[i] = fmt.Sprintf("%s %s %s/%s/%s", a.Principal, a.Operation, a.ResourceType, a.PatternType, a.Name)
		if a.Why == "" {
			out[i] += " (no reason)"
		}
	}
	sort.Strings(out)
	return out
}

func TestACLsAreWhatEachPrincipalNeeds(t *testing.T) {
	c, err := parse(t, fmt.Sprintf(aclYAML, "", "exactly_once"), nil)
	if err != nil {
		t.Fatal(err)
	}
	acls, err := c.ACLs(config.Principals{Router: "User:r", API: "User:api", Agents: map[string]string{"a": "User:agent-a"}})
	if err != nil {
		t.Fatal(err)
	}
	got := rules(acls)
	want := []string{
		"User:agent-a Read Group/Literal/ga", "User:agent-a Read Topic/Literal/a.req", "User:agent-a Write Topic/Literal/resp",
		"User:api Read Topic/Literal/res", "User:api Read Topic/Literal/to", "User:api Read Topic/Literal/prog", "User:api Write Topic/Literal/req",
		"User:r Describe Group/Literal/ga", "User:r Describe Group/Literal/switchboard-agent-b",
		"User:r Read Group/Literal/sb",
		"User:r Read Topic/Literal/a.req", "User:r Read Topic/Literal/ctx", "User:r Read Topic/Literal/fb",
		"User:r Read Topic/Literal/mcp.agent.b.request", "User:r Read Topic/Literal/pend", "User:r Read Topic/Literal/req",
		"User:r Read Topic/Literal/resp",
		"User:r Write Topic/Literal/a.req", "User:r Write Topic/Literal/dlq", "User:r Write Topic/Literal/fb",
		"User:r Write Topic/Literal/mcp.agent.b.request", "User:r Write Topic/Literal/pend", "User:r Write Topic/Literal/prog", "User:r Write Topic/Literal/req",
		"User:r Write Topic/Literal/res", "User:r Write Topic/Literal/resp", "User:r Write Topic/Literal/to",
		"User:r Write TransactionalId/Prefixed/sb.",
	}
	for _, name := range []string{"req", "resp", "res", "to", "pend", "dlq", "fb", "ctx", "prog", "a.req", "mcp.agent.b.request"} {
		want = append(want, "User:r DescribeConfigs Topic/Literal/"+name)
	}
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ACLs\n got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, a := range acls {
		if a.Principal == "User:agent-a" && a.Operation == config.ACLWrite && a.Name != "resp" {
			t.Errorf("an agent may write only responses, not %s", a.Name)
		}
	}
}

func TestACLsForInstancesAutoCreateAndAtLeastOnce(t *testing.T) {
	c, err := parse(t, fmt.Sprintf(aclYAML, ", auto_create: true", "exactly_once"), nil)
	if err != nil {
		t.Fatal(err)
	}
	acls, err := c.ACLs(config.Principals{Router: "User:r", Instances: []string{"r1", "r2"}})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rules(acls), "\n")
	for _, w := range []string{
		"User:r Write TransactionalId/Literal/sb.r1", "User:r Write TransactionalId/Literal/sb.r1.b",
		"User:r Write TransactionalId/Literal/sb.r2", "User:r Write TransactionalId/Literal/sb.r2.b",
		"User:r Create Topic/Literal/req", "User:r Create Topic/Literal/a.req",
	} {
		if !strings.Contains(got, w+"\n") && !strings.HasSuffix(got, w) {
			t.Errorf("missing %s in\n%s", w, got)
		}
	}
	if strings.Contains(got, "Prefixed") {
		t.Errorf("instances named, yet a prefixed rule:\n%s", got)
	}

	c, err = parse(t, fmt.Sprintf(aclYAML, "", "at_least_once"), nil)
	if err != nil {
		t.Fatal(err)
	}
	acls, err = c.ACLs(config.Principals{Router: "User:r"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rules(acls), "\n"); strings.Contains(got, "TransactionalId") || strings.Contains(got, "Create") {
		t.Errorf("at_least_once without auto_create needs no transactional id nor Create:\n%s", got)
	}
}

func TestACLsRefuseUnknownAgentsAndBarePrincipals(t *testing.T) {
	c, err := parse(t, fmt.Sprintf(aclYAML, "", "exactly_once"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ACLs(config.Principals{Agents: map[string]string{"z": "User:z"}}); err == nil || !strings.Contains(err.Error(), `no agent "z"`) {
		t.Errorf("unknown agent: %v", err)
	}
	if _, err := c.ACLs(config.Principals{Router: "router"}); err == nil || !strings.Contains(err.Error(), "want type:name") {
		t.Errorf("bare principal: %v", err)
	}
}
