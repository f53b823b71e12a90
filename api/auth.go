package api

import (
	"crypto/rsa"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/intents"
)

// DefaultPublicPaths are the paths served without a credential when
// AuthConfig.PublicPaths is nil: probes, Prometheus scrapes and the API's
// description. (The console's static files, / and /console/*, are always
// public: they hold no data.)
var DefaultPublicPaths = []string{"/healthz", "/readyz", "/metrics", "/v1/openapi.json"}

// Defaults of [AuthConfig] and [JWTConfig].
const (
	DefaultTenantClaim     = "tenant"
	DefaultAuthOffWarnings = 5 * time.Minute

	// MinAPIKeyBytes and MinHS256SecretBytes are the shortest API key and
	// HS256 secret accepted (RFC 7518 §3.2: an HS256 key is at least 256
	// bits).
	MinAPIKeyBytes      = 16
	MinHS256SecretBytes = 32
)

// AuthConfig says who may call the API and which tenant each caller acts
// for.
//
// With Required, every request except those to PublicPaths needs one
// credential: an API key or a JWT, in "Authorization: Bearer <credential>"
// (an API key may come in "X-API-Key" instead), or, on the WebSocket upgrade
// of /v1/stream, in the Sec-WebSocket-Protocol header as the subprotocol
// "bearer.<credential>" next to "switchboard.v1" (browsers cannot set
// headers on a WebSocket; the server answers with "switchboard.v1", never
// the token). A credential is never read from the query string. Each
// credential carries a tenant: intents submitted with it are stamped with
// that tenant, and it only ever sees that tenant's results.
//
// The zero AuthConfig (Required false) serves everyone without a credential
// and shows every tenant's results: for local development only. The server
// then logs a warning when Run starts and every AuthOffWarnings, and sets
// the gauge switchboard_auth_disabled to 1.
type AuthConfig struct {
	// Required turns authentication on. It needs at least one API key or a
	// JWT key.
	Required bool

	// APIKeys are the accepted API keys.
	APIKeys []Key

	// JWT says how JWTs are verified; its zero value accepts none.
	JWT JWTConfig

	// PublicPaths are served without a credential and without the origin
	// check (exact paths). Nil means DefaultPublicPaths; an empty non-nil
	// slice makes every path need a credential.
	PublicPaths []string

	// AuthOffWarnings is how often Run repeats its warning while Required
	// is false. Default DefaultAuthOffWarnings.
	AuthOffWarnings time.Duration
}

// Key is one accepted API key. Only its SHA-256 is kept; a presented key
// is hashed and compared with every configured hash in constant time.
type Key struct {
	// Name identifies the key in logs (never the key itself).
	Name string
	// Tenant is the tenant the key acts for.
	Tenant string
	// SHA256 is the SHA-256 of the key.
	SHA256 [32]byte
	// Admin lets the key call the admin endpoints (POST /v1/admin/reload).
	Admin bool
}

// JWTConfig verifies JWTs signed with HS256 (a shared secret) and/or RS256
// (an RSA key pair; the server holds the public keys). Only the algorithms
// with a key are accepted: "none", and HS256 when only RS256 keys are set,
// are refused, so an RS256 public key can never be used as an HMAC secret.
// A token must carry exp; exp, nbf and iat are checked on the server's
// injected clock, with Leeway.
type JWTConfig struct {
	// HS256Secret verifies HS256 tokens (at least MinHS256SecretBytes).
	HS256Secret []byte
	// RS256PublicKeys verify RS256 tokens; a token is accepted if any of
	// them verifies it (so keys can be rotated).
	RS256PublicKeys []*rsa.PublicKey
	// Issuer, if set, must equal the token's iss.
	Issuer string
	// Audience, if set, must be one of the token's aud.
	Audience string
	// TenantClaim is the claim holding the tenant (a non-empty string).
	// Default DefaultTenantClaim.
	TenantClaim string
	// AdminClaim, if set, names a boolean claim: a token where it is true
	// may call the admin endpoints (POST /v1/admin/reload).
	AdminClaim string
	// Leeway allows for clock skew on exp, nbf and iat.
	Leeway time.Duration
	// JWKSURL, if set, is where RS256 keys are fetched (a JWKS document,
	// RFC 7517), besides RS256PublicKeys: cached, refreshed every
	// JWKSRefresh and when a token names an unknown key id, each fetch
	// bounded in time and size (jwks.go).
	JWKSURL     string
	JWKSRefresh time.Duration
	// Resource is this server's MCP resource identifier for the
	// protected-resource metadata (RFC 9728), e.g.
	// https://switchboard.example.com/mcp. Default: the request's origin +
	// /mcp.
	Resource string
	// AuthorizationServers are named in that metadata. Default: Issuer.
	AuthorizationServers []string
}

func (j JWTConfig) enabled() bool {
	return len(j.HS256Secret) > 0 || len(j.RS256PublicKeys) > 0 || j.JWKSURL != ""
}

func (a *AuthConfig) setDefaults() {
	if a.PublicPaths == nil {
		a.PublicPaths = slices.Clone(DefaultPublicPaths)
	}
	if a.JWT.TenantClaim == "" {
		a.JWT.TenantClaim = DefaultTenantClaim
	}
	if a.AuthOffWarnings == 0 {
		a.AuthOffWarnings = DefaultAuthOffWarnings
	}
}

// validate reports the first mistake in a (defaults applied).
func (a AuthConfig) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: Auth."+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	if !a.Required {
		if len(a.APIKeys) > 0 || a.JWT.enabled() {
			return bad("APIKeys or JWT keys are set but Required is false: set Required, or drop the keys")
		}
	} else if len(a.APIKeys) == 0 && !a.JWT.enabled() {
		return bad("Required needs at least one API key, an HS256 secret or an RS256 public key")
	}
	names := map[string]bool{}
	for i, k := range a.APIKeys {
		if k.Name == "" || names[k.Name] {
			return bad("APIKeys[%d]: Name %q is empty or not unique", i, k.Name)
		}
		names[k.Name] = true
		if err := checkTenant(k.Tenant); err != nil {
			return bad("APIKeys[%d] (%s): Tenant: %v", i, k.Name, err)
		}
		if k.SHA256 == [32]byte{} {
			return bad("APIKeys[%d] (%s): SHA256 is not set", i, k.Name)
		}
	}
	j := a.JWT
	if n := len(j.HS256Secret); n > 0 && n < MinHS256SecretBytes {
		return bad("JWT.HS256Secret has %d bytes; use at least %d", n, MinHS256SecretBytes)
	}
	if j.JWKSURL != "" && !strings.HasPrefix(j.JWKSURL, "https://") && !strings.HasPrefix(j.JWKSURL, "http://") {
		return bad("JWT.JWKSURL %q is not an http(s) URL", j.JWKSURL)
	}
	if j.JWKSRefresh < 0 {
		return bad("JWT.JWKSRefresh is negative (%v)", j.JWKSRefresh)
	}
	for i, k := range j.RS256PublicKeys {
		if k == nil || k.N == nil || k.N.BitLen() < 2048 {
			return bad("JWT.RS256PublicKeys[%d] is not an RSA public key of at least 2048 bits", i)
		}
	}
	if j.Leeway < 0 {
		return bad("JWT.Leeway is negative (%v)", j.Leeway)
	}
	if a.AuthOffWarnings < 0 {
		return bad("AuthOffWarnings is negative (%v)", a.AuthOffWarnings)
	}
	for _, p := range a.PublicPaths {
		if !strings.HasPrefix(p, "/") {
			return bad("PublicPaths: %q is not a path (it must start with /)", p)
		}
		if DataPath(p) {
			return bad("PublicPaths: %q serves tenants' data: it cannot be public (turn authentication off instead, for dev)", p)
		}
	}
	return nil
}

// DataPath reports whether path is one of the API's routes that serve
// tenants' data (everything under /v1/ except the OpenAPI document, and
// the MCP endpoint). Such a
// path cannot be public: without a credential there is no tenant to scope it
// to.
func DataPath(path string) bool {
	return (strings.HasPrefix(path, "/v1/") && path != "/v1/openapi.json") || path == MCPPath
}

// checkTenant accepts what intents.Validate accepts in an intent's tenant.
func checkTenant(t string) error {
	if !intents.ValidLabel(t) {
		return fmt.Errorf("%q is not a tenant: 1 to %d bytes of printable UTF-8 without spaces", t, intents.MaxLabelLen)
	}
	return nil
}
