package api

import (
	"context"
	"net"
	"net/http"
)

// Hot reload: POST /v1/admin/reload asks the process to reread its
// configuration (cmd/switchboard's serve does the rereading, validating and
// applying; this file only guards the endpoint and answers), and SetCatalog
// is how the API's view of the intent types follows.

// codeForbiddenAdmin: 403, the caller may not use the admin endpoints.
const codeForbiddenAdmin = "forbidden_admin"

// Reload results, as in switchboard_config_reloads_total{result}.
const (
	ReloadApplied = "applied" // the new configuration is in force (perhaps the same as before)
	ReloadRefused = "refused" // it changes keys that need a restart; the old one stays
	ReloadInvalid = "invalid" // it does not load; the old one stays
)

// ReloadReport is the answer of POST /v1/admin/reload: the result, the
// hash of the configuration in force afterwards, and, when the old one
// stays, why (Error; for a refusal, Keys names each key that needs a
// restart).
type ReloadReport struct {
	Result string       `json:"result"`
	Hash   string       `json:"hash,omitempty"`
	Keys   []string     `json:"keys,omitempty"`
	Error  *ReloadError `json:"error,omitempty"`
}

// ReloadError says why a reload left the old configuration in force, in the
// API's error shape: code config_invalid or restart_required, the message
// (for an invalid file, each mistake as file:line: key: what), and the
// first key at fault.
type ReloadError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// ReloadFailed is the report of a reload that left the old configuration in
// force: result ReloadRefused or ReloadInvalid, the hash still in force,
// and the error's message (field: the first key at fault, if known).
func ReloadFailed(result, hash string, keys []string, message, field string) ReloadReport {
	code := "config_invalid"
	if result == ReloadRefused {
		code = "restart_required"
	}
	return ReloadReport{Result: result, Hash: hash, Keys: keys, Error: &ReloadError{Code: code, Message: message, Field: field}}
}

// WithReload enables POST /v1/admin/reload: f rereads and applies the
// configuration, and its report is the answer (200 applied, 409 refused,
// 422 invalid). f is called for admins only: with authentication on, an API
// key with admin or a JWT with the admin claim; with it off, a client on
// the loopback interface. Reloads may be asked concurrently: f serializes
// them if it must. Without it the endpoint answers 404.
func WithReload(f func(ctx context.Context) ReloadReport) Option {
	return func(o *options) { o.reload = f }
}

// catalogDoc is the catalog in force and the OpenAPI document made from it.
type catalogDoc struct {
	Catalog
	openAPI []byte
}

// SetCatalog replaces what GET /v1/agents, GET /v1/intent-types and
// /v1/openapi.json report as configured and the input schemas POST
// /v1/intents enforces. Requests being served finish with the catalog they
// started with. Safe for concurrent use.
func (s *Server) SetCatalog(c Catalog) {
	s.catalog.Store(&catalogDoc{Catalog: c, openAPI: withIntentTypes(openAPIDoc, c)})
}

// reloadConfig serves POST /v1/admin/reload.
func (s *Server) reloadConfig(w http.ResponseWriter, r *http.Request) {
	if s.reload == nil {
		writeError(w, http.StatusNotFound, codeNotFound, "this server has no configuration to reload", "")
		return
	}
	if !s.admin(r) {
		msg := "reloading needs an admin credential: an API key with admin: true, or a JWT whose http.auth.jwt.admin_claim is true"
		if !s.cfg.Auth.Required {
			msg = "with authentication off, reloading is served to loopback clients only"
		}
		writeError(w, http.StatusForbidden, codeForbiddenAdmin, msg, "")
		return
	}
	rep := s.reload(r.Context())
	status := http.StatusOK
	switch rep.Result {
	case ReloadRefused:
		status = http.StatusConflict
	case ReloadInvalid:
		status = http.StatusUnprocessableEntity
	}
	writeJSON(w, status, rep)
}

// admin reports whether r comes from an admin: with authentication on, a
// credential marked so; with it off, a client on the loopback interface
// (anyone who can reach the port could otherwise reconfigure the router).
func (s *Server) admin(r *http.Request) bool {
	if s.cfg.Auth.Required {
		p := principalFrom(r.Context())
		return p != nil && p.admin
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
