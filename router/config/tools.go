package config

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/switchboard-mcp/switchboard/intents/payload"
)

// Tool is the part of an intent type that describes it to callers: MCP
// clients list every intent type as a tool with these fields, and
// input_schema is enforced wherever an intent enters (the HTTP API, the MCP
// endpoint, and the router for intents written to Kafka directly).
type Tool struct {
	// Title is a short human-readable name. Default: none (clients show
	// the intent type's name).
	Title string `yaml:"title"`
	// Description says what the intent type does, for people and models.
	Description string `yaml:"description"`
	// InputSchema is the JSON Schema (draft 2020-12) of the payload: a
	// mapping written in the YAML, or the path of a JSON file (relative to
	// the configuration file). Absent: any JSON object.
	InputSchema *SchemaRef `yaml:"input_schema"`
	// OutputSchema is the JSON Schema of the answer, shown to MCP clients
	// (which may check structuredContent against it). Absent: none.
	OutputSchema *SchemaRef `yaml:"output_schema"`
	// Annotations are MCP's hints about the tool's behaviour (never
	// enforced). Absent: the MCP defaults.
	Annotations *ToolAnnotations `yaml:"annotations"`
}

// ToolAnnotations are MCP tool annotations. A nil field is left out (the
// client assumes MCP's default: not read-only, destructive, not idempotent,
// open world).
type ToolAnnotations struct {
	ReadOnly    *bool `yaml:"read_only"`
	Destructive *bool `yaml:"destructive"`
	Idempotent  *bool `yaml:"idempotent"`
	OpenWorld   *bool `yaml:"open_world"`
}

// SchemaRef is a JSON Schema written inline in the YAML, or the path of a
// file holding one. Validation compiles it: Schema is then set.
type SchemaRef struct {
	// Path is the file named in the YAML ("" when inline).
	Path string
	// Inline is the schema written in the YAML, as JSON (nil for a path).
	Inline json.RawMessage
	// Schema is the compiled schema, set by validation.
	Schema *payload.Schema

	yamlErr string // an inline schema that cannot be written as JSON
}

// UnmarshalYAML reads a mapping (or true/false) as an inline schema, and a
// string as a file path.
func (r *SchemaRef) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		r.Path = n.Value
		return nil
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return err
	}
	b, err := json.Marshal(jsonable(v))
	if err != nil {
		r.yamlErr = err.Error()
		return nil
	}
	r.Inline = b
	return nil
}

// jsonable turns what yaml.v3 decodes into values encoding/json writes
// (maps with non-string keys are not: their keys become strings).
func jsonable(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = jsonable(e)
		}
		return t
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range t {
			t[i] = jsonable(e)
		}
		return t
	}
	return v
}

// maxSchemaFile caps a schema file: a schema is a description, not data.
const maxSchemaFile = 1 << 20

// compileSchemas reads and compiles every intent type's input and output
// schema; a mistake is reported at intents.<name>.<key> with the file's
// line.
func (c *Config) compileSchemas(add func(msg string, path ...string)) {
	for name, it := range c.Intents {
		for _, s := range []struct {
			key string
			ref *SchemaRef
		}{{"input_schema", it.InputSchema}, {"output_schema", it.OutputSchema}} {
			if s.ref == nil {
				continue
			}
			if err := s.ref.compile(c.file); err != nil {
				add(err.Error(), "intents", name, s.key)
			}
		}
		if it.InputSchema != nil && it.InputSchema.Schema != nil {
			if !objectSchema(it.InputSchema.Schema) {
				add("an input schema must describe a JSON object (MCP tool arguments are an object): give it \"type\": \"object\"", "intents", name, "input_schema")
			}
		}
	}
}

// objectSchema reports whether the schema says "type": "object" (the MCP
// requirement on a tool's inputSchema).
func objectSchema(s *payload.Schema) bool {
	var top struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(s.JSON(), &top) != nil {
		return false
	}
	return top.Type == "object"
}

func (r *SchemaRef) compile(configFile string) error {
	if r.yamlErr != "" {
		return fmt.Errorf("cannot be written as JSON: %s", r.yamlErr)
	}
	raw, where := []byte(r.Inline), ""
	if r.Path != "" {
		p := r.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(configFile), p)
		}
		where = p + ": "
		b, err := readSchemaFile(p)
		if err != nil {
			return err
		}
		raw = b
	}
	s, err := payload.Compile(raw)
	if err != nil {
		return fmt.Errorf("%s%s", where, strings.TrimPrefix(err.Error(), payload.ErrInvalidSchema.Error()+": "))
	}
	r.Schema = s
	return nil
}

func readSchemaFile(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("cannot read the schema file: %v", err)
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, maxSchemaFile+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read the schema file: %v", err)
	}
	if len(b) > maxSchemaFile {
		return nil, fmt.Errorf("%s is larger than %d bytes, the most a schema file may hold", p, maxSchemaFile)
	}
	return b, nil
}

// validateTool checks an intent type's description fields.
func (c *Config) validateTool(name string, it *IntentType, add func(msg string, path ...string)) {
	if len(it.Title) > 256 {
		add("at most 256 bytes", "intents", name, "title")
	}
	if strings.TrimSpace(it.Description) == "" && it.Description != "" {
		add("is blank: write what the intent type does, or leave it out", "intents", name, "description")
	}
}
