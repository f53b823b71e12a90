package api

import (
	"net/http"
	"strings"
)

// Protected-resource metadata (RFC 9728), served when JWTs are accepted, so
// that an MCP client that meets a 401 learns which authorization server
// issues tokens for this server.
const (
	wellKnownPRM    = "/.well-known/oauth-protected-resource"
	wellKnownPRMMCP = wellKnownPRM + MCPPath // the path-suffixed form for the resource .../mcp
)

// resourceMetadata is the RFC 9728 document.
type resourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name"`
	ResourceDocumentation  string   `json:"resource_documentation,omitempty"`
}

// prmEnabled reports whether the metadata is served: when JWTs are
// accepted (an API key is not an OAuth token).
func (s *Server) prmEnabled() bool { return s.cfg.Auth.Required && s.cfg.Auth.JWT.enabled() }

// serveResourceMetadata serves both well-known paths.
func (s *Server) serveResourceMetadata(w http.ResponseWriter, r *http.Request) {
	if !s.prmEnabled() {
		s.notFound(w, r)
		return
	}
	j := s.cfg.Auth.JWT
	servers := j.AuthorizationServers
	if len(servers) == 0 && j.Issuer != "" {
		servers = []string{j.Issuer}
	}
	w.Header().Set("Access-Control-Allow-Origin", "*")
	writeJSON(w, http.StatusOK, resourceMetadata{
		Resource:               s.resourceURL(r),
		AuthorizationServers:   servers,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "Switchboard",
	})
}

// resourceURL is this server's MCP resource identifier: JWTConfig.Resource,
// or the request's origin + /mcp.
func (s *Server) resourceURL(r *http.Request) string {
	if res := s.cfg.Auth.JWT.Resource; res != "" {
		return res
	}
	return requestOrigin(r) + MCPPath
}

// resourceMetadataURL is where the metadata of the resource is: the
// path-suffixed well-known URL (RFC 9728 §3.1) at the resource's origin.
func (s *Server) resourceMetadataURL(r *http.Request) string {
	res := s.resourceURL(r)
	origin, path := res, ""
	if i := strings.Index(strings.TrimPrefix(strings.TrimPrefix(res, "https://"), "http://"), "/"); i >= 0 {
		cut := len(res) - len(strings.TrimPrefix(strings.TrimPrefix(res, "https://"), "http://")) + i
		origin, path = res[:cut], res[cut:]
	}
	return origin + wellKnownPRM + strings.TrimSuffix(path, "/")
}

func requestOrigin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
