package main

import (
	"os"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/router/config"
)

// apiConfig maps the http section of the configuration to the API's config.
// With withAuth it reads http.auth's secrets (from the environment and key
// files) and requires a credential on every request unless the mode is off;
// without it the API serves without authentication ('switchboard dev').
func apiConfig(cfg *config.Config, withAuth bool) (api.Config, error) {
	h := cfg.HTTP
	ws := h.WebSocket
	c := api.Config{
		Listen:                   h.Listen,
		MaxWait:                  h.MaxWait.D(),
		MaxBodyBytes:             h.MaxBodyBytes,
		MaxHeaderBytes:           h.MaxHeaderBytes,
		ReadHeaderTimeout:        h.ReadHeaderTimeout.D(),
		BodyReadTimeout:          h.BodyReadTimeout.D(),
		MaxReadingBytes:          h.MaxReadingBytes,
		MaxReadingBytesPerTenant: h.MaxReadingBytesPerTenant,
		MaxHTTPConnections:       h.MaxConnections,
		AdminListen:              h.AdminListen,
		IdleTimeout:              h.IdleTimeout.D(),
		AllowedOrigins:           h.AllowedOrigins,
		SendQueue:                ws.SendQueue,
		SendQueueBytes:           ws.SendQueueBytes,
		PingPeriod:               ws.PingPeriod.D(),
		PongWait:                 ws.PongWait.D(),
		WriteWait:                ws.WriteWait.D(),
		MaxMessageBytes:          ws.MaxMessageBytes,
		MaxSubscriptions:         ws.MaxSubscriptions,
		MessageRate:              ws.MessageRate,
		MessageBurst:             ws.MessageBurst,
		MaxConnectionsPerTenant:  ws.MaxConnectionsPerTenant,
		MaxConnections:           ws.MaxConnections,
		MaxReplays:               ws.MaxReplays,
		MaxReplaysPerTenant:      ws.MaxReplaysPerTenant,
	}
	if !withAuth {
		return c, nil
	}
	r, err := cfg.ResolveAuth(os.LookupEnv, os.ReadFile)
	if err != nil {
		return c, err
	}
	c.Auth = api.AuthConfig{
		Required:    r.Required,
		PublicPaths: r.PublicPaths,
		JWT: api.JWTConfig{
			HS256Secret:     r.HS256Secret,
			RS256PublicKeys: r.RS256PublicKeys,
			Issuer:          r.Issuer,
			Audience:        r.Audience,
			TenantClaim:     r.TenantClaim,
			AdminClaim:      r.AdminClaim,
			Leeway:          r.Leeway,

			JWKSURL:              r.JWKSURL,
			JWKSRefresh:          r.JWKSRefresh,
			Resource:             r.Resource,
			AuthorizationServers: r.AuthorizationServers,
		},
	}
	for _, k := range r.APIKeys {
		c.Auth.APIKeys = append(c.Auth.APIKeys, api.Key{Name: k.Name, Tenant: k.Tenant, SHA256: k.SHA256, Admin: k.Admin})
	}
	return c, c.Validate()
}

// checkServeAuth enforces that serve runs without authentication only when
// both the file (http.auth.mode: off) and the command line
// (--insecure-no-auth) say so.
func checkServeAuth(cfg *config.Config, insecure bool) error {
	off := cfg.HTTP.Auth.Mode == config.AuthOff
	switch {
	case off && !insecure:
		return cfg.ErrorAt("serve refuses to run without authentication: anyone who can reach the API could submit intents and read every tenant's results; configure http.auth, or start with --insecure-no-auth if that is really meant", "http", "auth", "mode")
	case insecure && !off:
		return cfg.ErrorAt("--insecure-no-auth is given but http.auth.mode is not off: set both to serve without authentication, or neither", "http", "auth", "mode")
	}
	return nil
}
