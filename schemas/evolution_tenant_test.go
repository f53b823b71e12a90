package schemas

import (
	"reflect"
	"testing"
)

// AgentResponse.tenant and ContextSnapshot.tenant (also inside
// AgentRequest.context) were added with null defaults: records written
// before them still read (tenant nil), and readers from before them skip
// them.

func TestEvolutionTenantFieldsOldWriter(t *testing.T) {
	c, fake := newAvroCodec(t)

	old := withoutFields(t, agentResponseAvsc, "tenant")
	b := writeWith(t, fake, "mcp.agent.response-value", old, map[string]any{
		"request_id": "i-1", "agent": "a", "status": "ok", "answer": `{"x":1}`, "error": nil, "produced_at": nil, "attempt": nil,
	})
	got := AgentResponse{Tenant: Ptr("stale")}
	if err := c.Decode(b, &got); err != nil {
		t.Fatal(err)
	}
	want := AgentResponse{RequestID: "i-1", Agent: "a", Status: StatusOK, Answer: Ptr(JSON(`{"x":1}`))}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("old AgentResponse read as %+v", got)
	}

	old = withoutFields(t, contextSnapshotAvsc, "tenant")
	b = writeWith(t, fake, "mcp.context.snapshot-value", old, map[string]any{
		"entity_id": "user-1", "snapshot_ts": int64(5), "version": int64(6), "features": map[string]float64{"f": 1}, "source_topic": nil,
	})
	var snap ContextSnapshot
	if err := c.Decode(b, &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Tenant != nil || snap.EntityID != "user-1" || snap.Version != 6 || snap.Features["f"] != 1 {
		t.Fatalf("old ContextSnapshot read as %+v", snap)
	}
}

func TestEvolutionTenantFieldsOldReader(t *testing.T) {
	c, _ := newAvroCodec(t)
	b, err := c.Encode("mcp.agent.response", &AgentResponse{RequestID: "i-1", Agent: "a", Status: StatusOK, Tenant: Ptr("acme")})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		RequestID string `avro:"request_id"`
		Agent     string `avro:"agent"`
	}
	if err := decodeWithWriter(b[wireHeaderLen:], agentResponseAvsc, withoutFields(t, agentResponseAvsc, "tenant"), &got); err != nil {
		t.Fatal(err)
	}
	if got.RequestID != "i-1" || got.Agent != "a" {
		t.Fatalf("old reader read %+v", got)
	}

	b, err = c.Encode("mcp.context.snapshot", &ContextSnapshot{EntityID: "user-1", Version: 2, Features: map[string]float64{}, Tenant: Ptr("acme")})
	if err != nil {
		t.Fatal(err)
	}
	var snap struct {
		EntityID string `avro:"entity_id"`
		Version  int64  `avro:"version"`
	}
	if err := decodeWithWriter(b[wireHeaderLen:], contextSnapshotAvsc, withoutFields(t, contextSnapshotAvsc, "tenant"), &snap); err != nil {
		t.Fatal(err)
	}
	if snap.EntityID != "user-1" || snap.Version != 2 {
		t.Fatalf("old reader read %+v", snap)
	}
}

// Both encodings carry the tenants through.
func TestTenantFieldsRoundTrip(t *testing.T) {
	avro, _ := newAvroCodec(t)
	for _, c := range []*Codec{avro, newJSONCodec(t)} {
		resp := &AgentResponse{RequestID: "i-1", Agent: "a", Status: StatusOK, Tenant: Ptr("")}
		b, err := c.Encode("mcp.agent.response", resp)
		if err != nil {
			t.Fatal(err)
		}
		var got AgentResponse
		if err := c.Decode(b, &got); err != nil {
			t.Fatal(err)
		}
		if got.Tenant == nil || *got.Tenant != "" {
			t.Fatalf("%v: an echoed empty tenant read back as %v", c.Encoding(), got.Tenant)
		}
		ar := &AgentRequest{
			IntentID: "i-1", IntentType: "t", Agent: "a", Payload: "{}", Attempt: 1,
			Context: &ContextSnapshot{EntityID: "user-1", Features: map[string]float64{"f": 1}, Tenant: Ptr("acme")},
		}
		if b, err = c.Encode("mcp.agent.a.request", ar); err != nil {
			t.Fatal(err)
		}
		var gotAR AgentRequest
		if err := c.Decode(b, &gotAR); err != nil {
			t.Fatal(err)
		}
		if gotAR.Context == nil || gotAR.Context.Tenant == nil || *gotAR.Context.Tenant != "acme" {
			t.Fatalf("%v: the attached snapshot lost its tenant: %+v", c.Encoding(), gotAR.Context)
		}
	}
}
