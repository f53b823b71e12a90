package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/intents/payload"
)

func orderCatalog(t *testing.T) api.Catalog {
	t.Helper()
	in, err := payload.Compile([]byte(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
		"properties":{"amount":{"type":"number","minimum":0},"lines":{"type":"array","items":{"type":"object","required":["sku"]}}},
		"required":["amount"],"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := payload.Compile([]byte(`{"type":"object","properties":{"decision":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	return api.Catalog{IntentTypes: []api.IntentTypeInfo{
		{
			Name: "order", Agent: "a", TimeoutMs: 2000, Fallback: "none", Title: "Place an order", Description: "Places an order.",
			InputSchema: in, OutputSchema: out, Annotations: &api.ToolAnnotations{Destructive: &yes},
		},
		{Name: "free", Agent: "a", TimeoutMs: 2000, Fallback: "none"},
	}}
}

// TestPayloadFailingItsSchemaIs422: POST /v1/intents checks the payload
// against the intent type's input_schema and answers 422 naming the
// failing path; nothing is published.
func TestPayloadFailingItsSchemaIs422(t *testing.T) {
	h := newHarness(t, withOption(api.WithCatalog(orderCatalog(t))))
	for _, tc := range []struct{ body, path string }{
		{`{"intent_type":"order","payload":{"amount":-1}}`, "/payload/amount"},
		{`{"intent_type":"order","payload":{"amount":1,"lines":[{"sku":"a"},{}]}}`, "/payload/lines/1"},
		{`{"intent_type":"order","payload":{"amount":1,"note":"x"}}`, "/payload"},
		// A name twice: the schema would check the last amount, an agent
		// whose parser keeps the first would act on -1.
		{`{"intent_type":"order","payload":{"amount":-1,"amount":1}}`, "/payload"},
		{`{"intent_type":"order","payload":{"amount":1,"lines":[{"sku":"a","sku":"b"}]}}`, "/payload/lines/0"},
	} {
		resp, body := h.do("POST", "/v1/intents", tc.body)
		var e struct {
			Error struct{ Code, Message, Field, Path string }
		}
		_ = json.Unmarshal(body, &e)
		if resp.StatusCode != http.StatusUnprocessableEntity || e.Error.Code != "invalid_payload" || e.Error.Path != tc.path || e.Error.Field != "payload" {
			t.Errorf("%s: %d %s, want 422 invalid_payload at %s", tc.body, resp.StatusCode, body, tc.path)
		}
	}
	if n := len(h.pub.Requests()); n != 0 {
		t.Fatalf("%d intents published, want none", n)
	}
	for _, body := range []string{`{"intent_type":"order","payload":{"amount":3}}`, `{"intent_type":"free","payload":[1,2]}`, `{"intent_type":"unknown","payload":1}`} {
		if resp, b := h.do("POST", "/v1/intents", body); resp.StatusCode != http.StatusAccepted {
			t.Errorf("%s: %d %s, want 202", body, resp.StatusCode, b)
		}
	}
}

// TestIntentTypesCarryTheirSchemas: GET /v1/intent-types shows each type's
// tool description and schemas as configured.
func TestIntentTypesCarryTheirSchemas(t *testing.T) {
	h := newHarness(t, withOption(api.WithCatalog(orderCatalog(t))))
	resp, body := h.do("GET", "/v1/intent-types", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var v struct {
		IntentTypes []struct {
			Name         string          `json:"name"`
			Title        string          `json:"title"`
			InputSchema  json.RawMessage `json:"input_schema"`
			OutputSchema json.RawMessage `json:"output_schema"`
			Annotations  map[string]bool `json:"annotations"`
		} `json:"intent_types"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	for _, it := range v.IntentTypes {
		if it.Name != "order" {
			continue
		}
		if it.Title != "Place an order" || !strings.Contains(string(it.InputSchema), `"additionalProperties":false`) ||
			!strings.Contains(string(it.OutputSchema), `"decision"`) || !it.Annotations["destructive"] {
			t.Fatalf("order = %+v", it)
		}
		return
	}
	t.Fatalf("no order in %s", body)
}

// TestOpenAPICarriesTheSchemas: the OpenAPI document holds each intent
// type's schemas as configured.
func TestOpenAPICarriesTheSchemas(t *testing.T) {
	h := newHarness(t, withOption(api.WithCatalog(orderCatalog(t))))
	_, body := h.do("GET", "/v1/openapi.json", "")
	var doc struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
		IntentTypes map[string]struct {
			InputSchema struct {
				Ref string `json:"$ref"`
			} `json:"input_schema"`
		} `json:"x-intent-types"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	var order map[string]any
	_ = json.Unmarshal(doc.Components.Schemas["IntentPayload.order"], &order)
	if order["$schema"] != "https://json-schema.org/draft/2020-12/schema" || order["additionalProperties"] != false ||
		doc.IntentTypes["order"].InputSchema.Ref != "#/components/schemas/IntentPayload.order" ||
		doc.Components.Schemas["IntentRequest"] == nil || doc.Components.Schemas["IntentAnswer.order"] == nil {
		t.Fatalf("openapi.json lacks the order schemas: %s", body)
	}
}
