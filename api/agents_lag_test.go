package api_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/router/lag"
)

// TestAgentsShowLag: GET /v1/agents carries each agent's lag as the lag
// sampler reports it; a missing group says so and shows no count.
func TestAgentsShowLag(t *testing.T) {
	at := time.UnixMilli(1_800_000_000_000)
	h := newHarness(t, withOption(api.WithCatalog(api.Catalog{
		Agents: []api.AgentInfo{{Name: "echo", Topic: "mcp.agent.echo.request"}, {Name: "ghost", Topic: "mcp.agent.ghost.request"}},
	})), withOption(api.WithAgentLag(func(a string) any {
		switch a {
		case "echo":
			return lag.AgentLag{
				Agent: a, GroupID: "switchboard-agent-echo", State: lag.StateStable, Members: 2, Records: 7000,
				OldestAge: 90 * time.Second, HasAge: true, SampledAt: at,
				Partitions: []lag.PartitionLag{{Partition: 0, Committed: 10, End: 7010, Records: 7000}},
			}
		case "ghost":
			return lag.AgentLag{Agent: a, GroupID: "switchboard-agent-ghost", State: lag.StateMissing, SampledAt: at}
		}
		return nil
	})))
	resp, body := h.do("GET", "/v1/agents", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var out struct {
		Agents []struct {
			Name string         `json:"name"`
			Lag  map[string]any `json:"lag"`
		} `json:"agents"`
	}
	if err := json.Unmarshal(body, &out); err != nil || len(out.Agents) != 2 {
		t.Fatalf("%v: %s", err, body)
	}
	echo, ghost := out.Agents[0].Lag, out.Agents[1].Lag
	if echo["state"] != "stable" || echo["records"] != 7000.0 || echo["oldest_age_ms"] != 90000.0 || echo["members"] != 2.0 ||
		echo["group_id"] != "switchboard-agent-echo" || echo["sampled_at"] != float64(at.UnixMilli()) {
		t.Errorf("echo's lag: %v", echo)
	}
	if parts, _ := echo["partitions"].([]any); len(parts) != 1 {
		t.Errorf("echo's partitions: %v", echo["partitions"])
	}
	if ghost["state"] != "missing" || ghost["group_id"] != "switchboard-agent-ghost" {
		t.Errorf("ghost's lag: %v", ghost)
	}
	if _, ok := ghost["records"]; ok {
		t.Errorf("a missing group shows a record count: %v", ghost)
	}
}
