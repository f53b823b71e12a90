package api

import (
	"context"
	"net/http"
)

// MCPPath is where [WithMCP]'s handler is mounted: the Model Context
// Protocol endpoint (Streamable HTTP; package api/mcp).
const MCPPath = "/mcp"

// WithMCP mounts h at [MCPPath] for every method, behind the same guard as
// the API's routes: the browser-origin check and CORS, then the credential
// (401 with WWW-Authenticate, naming the protected-resource metadata when
// JWTs are accepted). h learns the caller's tenant with [TenantFrom].
// Default: no MCP endpoint (404).
func WithMCP(h http.Handler) Option { return func(o *options) { o.mcp = h } }

// shutdowner is a mounted handler that must end its long requests before
// the HTTP server can finish (the MCP endpoint's sessions and waits).
type shutdowner interface {
	Shutdown(ctx context.Context) error
}

// shutdownMCP ends the MCP endpoint's sessions and waiting calls, if it
// can be told to.
func (s *Server) shutdownMCP(ctx context.Context) {
	if sd, ok := s.mcp.(shutdowner); ok {
		_ = sd.Shutdown(ctx)
	}
}

// TenantFrom returns the tenant the request's credential acts for, and
// false when the request carries no principal (authentication off, or a
// public path). Handlers mounted on the server (see [WithMCP]) scope
// everything they do by it.
func TenantFrom(ctx context.Context) (string, bool) {
	p := principalFrom(ctx)
	if p == nil {
		return "", false
	}
	return p.tenant, true
}

// mountMCP routes MCPPath (POST, GET and DELETE, as Streamable HTTP uses
// them) to the MCP handler, its writes bounded by the write wait
// (writewait.go), or to 404 without one.
func (s *Server) mountMCP(h http.Handler) {
	s.mcp = h
	if h == nil {
		h = http.HandlerFunc(s.notFound)
	} else {
		h = s.boundWrites(h)
	}
	for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		s.router.Method(m, MCPPath, h)
	}
}
