package api

import (
	"log/slog"
	"net/http"
	"net/url"
	"strings"
)

// Error codes of authentication, authorisation and limits (stable, like
// those in respond.go).
const (
	codeUnauthenticated    = "unauthenticated"      // 401: no credential
	codeInvalidToken       = "invalid_token"        // 401: a bad JWT (signature, algorithm, issuer, audience, tenant claim) or a malformed header
	codeTokenExpired       = "token_expired"        // 401: the JWT's exp has passed
	codeTokenNotYetValid   = "token_not_yet_valid"  // 401: the JWT's nbf or iat is in the future
	codeInvalidAPIKey      = "invalid_api_key"      // 401: no such API key
	codeForbiddenTenant    = "forbidden_tenant"     // 403: the body names another tenant than the credential's
	codeTooManyConnections = "too_many_connections" // 429: the tenant holds Config.MaxConnectionsPerTenant streams
	codeRateLimited        = "rate_limited"         // stream: a client message over Config.MessageRate
)

// CORS answers: what a browser page on an allowed origin may send and read.
const (
	corsAllowMethods  = "GET, POST, DELETE, OPTIONS"
	corsAllowHeaders  = "Authorization, Content-Type, Idempotency-Key, Traceparent, X-API-Key, Mcp-Session-Id, Mcp-Protocol-Version, Mcp-Method, Mcp-Name, Last-Event-ID"
	corsExposeHeaders = "Location, WWW-Authenticate, Idempotent-Replayed, Mcp-Session-Id"
	corsMaxAge        = "600"
)

// guard runs before routing on every request except those to public paths:
//
//  1. a request with an Origin header (a browser's) from an origin that is
//     not allowed is refused with 403 forbidden_origin; an allowed
//     cross-origin request gets CORS headers, and a CORS preflight is
//     answered here (204) without a credential;
//  2. with authentication on, the request's credential is checked (401 with
//     WWW-Authenticate when missing or bad) and its principal goes into the
//     request's context.
//
// Requests without an Origin (curl, servers, the Go client) skip step 1.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.auth.public[r.URL.Path] || consoleAsset(r) {
			next.ServeHTTP(w, r)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" {
			if !s.originAllowed(r) {
				s.refuse(w, r, &authError{
					status: http.StatusForbidden, code: codeForbiddenOrigin,
					message: "origin " + origin + " is not allowed: add it to http.allowed_origins",
				})
				return
			}
			if !sameOrigin(r, origin) {
				h := w.Header()
				h.Add("Vary", "Origin")
				h.Set("Access-Control-Allow-Origin", origin)
				h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
				if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
					h.Set("Access-Control-Allow-Methods", corsAllowMethods)
					h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
					h.Set("Access-Control-Max-Age", corsMaxAge)
					w.WriteHeader(http.StatusNoContent)
					return
				}
			}
		}
		if !s.cfg.Auth.Required {
			next.ServeHTTP(w, r)
			return
		}
		p, aerr := s.auth.authenticate(r)
		if aerr != nil {
			s.refuse(w, r, aerr)
			return
		}
		next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), p)))
	})
}

// refuse answers a refused request in JSON, counts it by code, and logs it
// (never the credential).
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, e *authError) {
	s.metrics.authFailures.WithLabelValues(e.code).Inc()
	s.log.LogAttrs(r.Context(), slog.LevelDebug, "request refused",
		slog.String("code", e.code), slog.String("path", r.URL.Path), slog.String("remote", r.RemoteAddr))
	if e.status == http.StatusUnauthorized {
		v := `Bearer realm="switchboard"`
		if s.prmEnabled() {
			v += `, resource_metadata="` + s.resourceMetadataURL(r) + `"`
		}
		if e.code != codeUnauthenticated {
			v += `, error="invalid_token", error_description="` + strings.ReplaceAll(e.message, `"`, `'`) + `"`
		}
		w.Header().Set("WWW-Authenticate", v)
	}
	writeError(w, e.status, e.code, e.message, "")
}

// originAllowed allows requests without an Origin (not browsers), from the
// server's own origin, and from Config.AllowedOrigins ("*": any).
func (s *Server) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || sameOrigin(r, origin) {
		return true
	}
	for _, o := range s.cfg.AllowedOrigins {
		if o == "*" || strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	return false
}

// sameOrigin reports whether origin's host is the request's Host (as
// gorilla/websocket's default check does: the scheme is not compared, since
// TLS may end at a proxy).
func sameOrigin(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

// consoleAsset reports whether r asks for the console's page or one of its
// files: static, holding no data, so served without a credential. The
// console's own API calls and stream carry the credential its user enters.
func consoleAsset(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	return r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, "/console/")
}
