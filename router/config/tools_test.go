package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/router/config"
)

func TestToolMetadataInline(t *testing.T) {
	c, err := parse(t, `agents: {a: {}}
intents:
  echo:
    agent: a
    title: Echo
    description: Answers with what it was sent.
    input_schema:
      $schema: https://json-schema.org/draft/2020-12/schema
      type: object
      properties: {text: {type: string, maxLength: 10}}
      required: [text]
      additionalProperties: false
    output_schema: {type: object}
    annotations: {read_only: true, idempotent: true}
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	it := c.Intents["echo"]
	if it.Title != "Echo" || it.Description != "Answers with what it was sent." {
		t.Fatalf("title/description = %q/%q", it.Title, it.Description)
	}
	in := it.InputSchema.Schema
	if in == nil || it.OutputSchema.Schema == nil {
		t.Fatal("schemas not compiled")
	}
	if !strings.Contains(string(in.JSON()), `"$schema":"https://json-schema.org/draft/2020-12/schema"`) {
		t.Fatalf("input schema JSON = %s", in.JSON())
	}
	if err := in.Validate([]byte(`{"text":"this is too long"}`)); err == nil || !strings.Contains(err.Error(), "/text") {
		t.Fatalf("Validate = %v, want an error at /text", err)
	}
	a := it.Annotations
	if a == nil || a.ReadOnly == nil || !*a.ReadOnly || a.Destructive != nil || a.Idempotent == nil || !*a.Idempotent {
		t.Fatalf("annotations = %+v", a)
	}
}

func TestToolSchemaFileRelativeToTheConfig(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "schemas"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "schemas", "order.json"), []byte(`{"type":"object","required":["amount"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "sb.yaml")
	if err := os.WriteFile(cfg, []byte("agents: {a: {}}\nintents:\n  order: {agent: a, input_schema: schemas/order.json}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Intents["order"].InputSchema.Schema.Validate([]byte(`{}`)); err == nil {
		t.Fatal("the file's schema is not enforced")
	}
}

func TestToolSchemaErrorsNameFileLineAndKey(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{
			"does not compile", "agents: {a: {}}\nintents:\n  e:\n    agent: a\n    input_schema: {type: object, properties: {n: {type: numbr}}}\n",
			"sb.yaml:5: intents.e.input_schema: ",
		},
		{
			"bad pattern in output", "agents: {a: {}}\nintents:\n  e:\n    agent: a\n    output_schema: {type: string, pattern: \"(\"}\n",
			"sb.yaml:5: intents.e.output_schema: ",
		},
		{
			"missing file", "agents: {a: {}}\nintents:\n  e:\n    agent: a\n    input_schema: nowhere/s.json\n",
			"sb.yaml:5: intents.e.input_schema: cannot read the schema file",
		},
		{
			"not an object", "agents: {a: {}}\nintents:\n  e:\n    agent: a\n    input_schema: {type: array}\n",
			"sb.yaml:5: intents.e.input_schema: an input schema must describe a JSON object",
		},
		{
			"external ref", "agents: {a: {}}\nintents:\n  e:\n    agent: a\n    input_schema: {$ref: \"https://example.com/x.json\"}\n",
			"sb.yaml:5: intents.e.input_schema: ",
		},
		{
			"unknown annotation", "agents: {a: {}}\nintents:\n  e:\n    agent: a\n    annotations: {readonly: true}\n",
			`sb.yaml:5: intents.e.annotations.readonly: unknown key "readonly"`,
		},
	} {
		_, err := parse(t, tc.yaml, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

func TestJWKSAndResourceConfig(t *testing.T) {
	c, err := parse(t, "agents: {a: {}}\nintents: {e: {agent: a}}\nhttp:\n  auth:\n    jwt:\n      jwks_url: https://auth.example.com/.well-known/jwks.json\n      issuer: https://auth.example.com/\n      resource: https://sb.example.com/mcp\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.ResolveAuth(nil, os.ReadFile)
	if err != nil || r.JWKSURL != "https://auth.example.com/.well-known/jwks.json" || r.Resource != "https://sb.example.com/mcp" {
		t.Fatalf("resolved %+v %v", r, err)
	}
	_, err = parse(t, "agents: {a: {}}\nintents: {e: {agent: a}}\nhttp:\n  auth:\n    jwt:\n      jwks_url: ftp://x\n", nil)
	if err == nil || !strings.Contains(err.Error(), "sb.yaml:6: http.auth.jwt.jwks_url") {
		t.Fatalf("bad jwks_url: %v", err)
	}
}
