package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

// TestOpenAPIMatchesRoutes walks the router and compares its routes with
// the paths and methods of /v1/openapi.json, both ways.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	h := newHarness(t)
	resp, body := h.do("GET", "/v1/openapi.json", "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/openapi.json: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("the document is not JSON: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi = %q, want 3.x", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	routes, ok := h.srv.Handler().(chi.Routes)
	if !ok {
		t.Fatalf("Handler is a %T, not a chi router", h.srv.Handler())
	}
	served := map[string]bool{}
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		served[method+" "+route] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var missing, extra []string
	for r := range served {
		if !documented[r] {
			missing = append(missing, r)
		}
	}
	for r := range documented {
		if !served[r] {
			extra = append(extra, r)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("openapi.json is out of step with the routes:\n  served, not documented: %v\n  documented, not served: %v", missing, extra)
	}
	if len(served) < 10 {
		t.Fatalf("walked only %d routes: %v", len(served), served)
	}
}
