package api

import (
	_ "embed"
	"net/http"
)

// openAPIDoc is the OpenAPI 3 description of the HTTP API, written by hand
// (TestOpenAPIMatchesRoutes keeps its paths and methods in step with the
// router).
//
//go:embed openapi.json
var openAPIDoc []byte

// openAPI serves GET /v1/openapi.json.
func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(openAPIDoc)
}
