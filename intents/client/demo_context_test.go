package client_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/switchboard-mcp/switchboard/intents/client"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// The demo agent shows the context it received in its answer.
func TestDemoHandlerEchoesTheContext(t *testing.T) {
	h := client.DemoHandler("slow", 0, 0, nil)
	req := &schemas.AgentRequest{
		IntentID: "i-1", IntentType: "fraud_check", Agent: "slow", Payload: `{"amount":1}`,
		Context:       &schemas.ContextSnapshot{EntityID: "user-1", Version: 3, SnapshotTs: 9, Features: map[string]float64{"clicks": 2}},
		ContextStatus: schemas.Ptr(schemas.ContextFresh),
	}
	a, err := h(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Agent         string                  `json:"agent"`
		Context       schemas.ContextSnapshot `json:"context"`
		ContextStatus string                  `json:"context_status"`
	}
	if err := json.Unmarshal([]byte(a), &got); err != nil {
		t.Fatalf("answer %s: %v", a, err)
	}
	if got.Agent != "slow" || got.Context.Version != 3 || got.Context.Features["clicks"] != 2 || got.ContextStatus != "fresh" {
		t.Fatalf("answer %s", a)
	}
	req.Context, req.ContextStatus = nil, schemas.Ptr(schemas.ContextMissing)
	if a, _ := h(context.Background(), req); string(a) != `{"agent":"slow","echo":{"amount":1},"context":null,"context_status":"missing"}` {
		t.Fatalf("missing: %s", a)
	}
}
