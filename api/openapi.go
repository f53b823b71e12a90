package api

import (
	_ "embed"
	"encoding/json"
	"net/http"
)

// openAPIDoc is the OpenAPI 3 description of the HTTP API, written by hand
// (TestOpenAPIMatchesRoutes keeps its paths and methods in step with the
// router). [Server] adds the configured intent types' schemas to it
// (withIntentTypes).
//
//go:embed openapi.json
var openAPIDoc []byte

// openAPI serves GET /v1/openapi.json.
func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(s.catalog.Load().openAPI)
}

// withIntentTypes adds the catalog's schemas to the document: each intent
// type's input_schema as components.schemas."IntentPayload.<type>" and its
// output_schema as "IntentAnswer.<type>" (JSON Schema 2020-12 as
// configured), and under "x-intent-types" each type's title, description,
// annotations and references to those schemas, so a client generator can
// type the payload of each intent type. It returns doc unchanged if it
// cannot be read (it is ours: a test reads it).
func withIntentTypes(doc []byte, c Catalog) []byte {
	if len(c.IntentTypes) == 0 {
		return doc
	}
	var d map[string]json.RawMessage
	if json.Unmarshal(doc, &d) != nil {
		return doc
	}
	var comps map[string]json.RawMessage
	if json.Unmarshal(d["components"], &comps) != nil {
		return doc
	}
	var schemas map[string]json.RawMessage
	if json.Unmarshal(comps["schemas"], &schemas) != nil {
		return doc
	}
	type ref struct {
		Ref string `json:"$ref"`
	}
	type typeDoc struct {
		Title        string           `json:"title,omitempty"`
		Description  string           `json:"description,omitempty"`
		InputSchema  *ref             `json:"input_schema,omitempty"`
		OutputSchema *ref             `json:"output_schema,omitempty"`
		Annotations  *ToolAnnotations `json:"annotations,omitempty"`
	}
	types := map[string]typeDoc{}
	for _, t := range c.IntentTypes {
		td := typeDoc{Title: t.Title, Description: t.Description, Annotations: t.Annotations}
		if t.InputSchema != nil {
			schemas["IntentPayload."+t.Name] = t.InputSchema.JSON()
			td.InputSchema = &ref{"#/components/schemas/IntentPayload." + t.Name}
		}
		if t.OutputSchema != nil {
			schemas["IntentAnswer."+t.Name] = t.OutputSchema.JSON()
			td.OutputSchema = &ref{"#/components/schemas/IntentAnswer." + t.Name}
		}
		types[t.Name] = td
	}
	var err error
	if comps["schemas"], err = json.Marshal(schemas); err != nil {
		return doc
	}
	if d["components"], err = json.Marshal(comps); err != nil {
		return doc
	}
	if d["x-intent-types"], err = json.Marshal(types); err != nil {
		return doc
	}
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return doc
	}
	return out
}
