package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"

	"github.com/golang-jwt/jwt/v5"
	"github.com/gorilla/websocket"
	"github.com/jonboulle/clockwork"
)

// Subprotocols of /v1/stream. A browser passes its credential as the
// subprotocol bearerPrefix+token, next to streamProtocol, which the server
// selects (a browser drops a connection whose server selects none of the
// offered subprotocols).
const (
	streamProtocol = "switchboard.v1"
	bearerPrefix   = "bearer."
)

// principal is who made a request: the tenant it acts for and, for logs, the
// API key's name or the JWT's subject.
type principal struct {
	tenant string
	name   string
	method string // "api_key" or "jwt"
	admin  bool   // may call the admin endpoints (reload.go)
}

type principalKey struct{}

func withPrincipal(ctx context.Context, p *principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// principalFrom returns the request's principal, or nil when authentication
// is off (or the path is public).
func principalFrom(ctx context.Context) *principal {
	p, _ := ctx.Value(principalKey{}).(*principal)
	return p
}

// authError is why a request was refused: its status, stable code and
// message (never the credential).
type authError struct {
	status  int
	code    string
	message string
}

func (e *authError) Error() string { return e.code + ": " + e.message }

func unauthorized(code, format string, args ...any) *authError {
	return &authError{status: http.StatusUnauthorized, code: code, message: fmt.Sprintf(format, args...)}
}

// authenticator checks credentials. It is immutable after newAuthenticator
// and safe for concurrent use.
type authenticator struct {
	keys  []Key
	jwt   *jwt.Parser // nil: JWTs are not accepted
	hs256 []byte
	rs256 jwt.VerificationKeySet
	claim string
	// adminClaim is the JWT claim that makes a token an admin's ("": none).
	adminClaim string
	public     map[string]bool
	jwks       *jwks // nil: no JWKS URL
}

func newAuthenticator(cfg AuthConfig, clock clockwork.Clock, log *slog.Logger) *authenticator {
	a := &authenticator{keys: cfg.APIKeys, claim: cfg.JWT.TenantClaim, adminClaim: cfg.JWT.AdminClaim, public: map[string]bool{}}
	if cfg.Required && cfg.JWT.enabled() {
		// The protected-resource metadata is public (RFC 9728).
		a.public[wellKnownPRM], a.public[wellKnownPRMMCP] = true, true
	}
	for _, p := range cfg.PublicPaths {
		a.public[p] = true
	}
	j := cfg.JWT
	if !j.enabled() {
		return a
	}
	var algs []string
	if len(j.HS256Secret) > 0 {
		a.hs256 = j.HS256Secret
		algs = append(algs, jwt.SigningMethodHS256.Alg())
	}
	if len(j.RS256PublicKeys) > 0 || j.JWKSURL != "" {
		for _, k := range j.RS256PublicKeys {
			a.rs256.Keys = append(a.rs256.Keys, k)
		}
		algs = append(algs, jwt.SigningMethodRS256.Alg())
	}
	if j.JWKSURL != "" {
		a.jwks = newJWKS(j.JWKSURL, j.JWKSRefresh, clock, log)
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(algs),
		jwt.WithTimeFunc(clock.Now),
		jwt.WithLeeway(j.Leeway),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
	}
	if j.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(j.Issuer))
	}
	if j.Audience != "" {
		opts = append(opts, jwt.WithAudience(j.Audience))
	}
	a.jwt = jwt.NewParser(opts...)
	return a
}

// authenticate finds the request's one credential and checks it.
func (a *authenticator) authenticate(r *http.Request) (*principal, *authError) {
	cred, isKey, aerr := credentialOf(r)
	if aerr != nil {
		return nil, aerr
	}
	if !isKey && strings.Count(cred, ".") == 2 {
		p, jerr := a.checkJWT(cred)
		if jerr != nil && len(a.keys) > 0 {
			// An API key may have two dots too: it is one if it matches
			// (else the JWT's error, which says more, is the answer).
			if kp, kerr := a.checkAPIKey(cred); kerr == nil {
				return kp, nil
			}
		}
		return p, jerr
	}
	return a.checkAPIKey(cred)
}

// credentialOf returns the credential of r: from Authorization (Bearer),
// X-API-Key (isKey), or, on a WebSocket upgrade, a "bearer.<token>"
// subprotocol. More than one is an error, as is none.
func credentialOf(r *http.Request) (cred string, isKey bool, _ *authError) {
	var found []string
	// A header sent twice is two credentials, never the first of them:
	// a proxy in front may have checked the other one.
	for _, name := range []string{"Authorization", "X-API-Key"} {
		if n := len(r.Header.Values(name)); n > 1 {
			return "", false, unauthorized(codeInvalidToken, "send one credential, not several (%s %d times)", name, n)
		}
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, ok := strings.Cut(h, " ")
		token = strings.TrimSpace(token)
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			return "", false, unauthorized(codeInvalidToken, "the Authorization header must be \"Bearer <token>\"")
		}
		found, cred = append(found, "Authorization"), token
	}
	if k := r.Header.Get("X-API-Key"); k != "" {
		found, cred, isKey = append(found, "X-API-Key"), k, true
	}
	if websocket.IsWebSocketUpgrade(r) {
		for _, p := range websocket.Subprotocols(r) {
			if t, ok := strings.CutPrefix(p, bearerPrefix); ok {
				found, cred, isKey = append(found, "Sec-WebSocket-Protocol"), t, false
			}
		}
	}
	switch len(found) {
	case 0:
		return "", false, unauthorized(codeUnauthenticated,
			"a credential is required: send \"Authorization: Bearer <API key or JWT>\" (browsers' WebSockets: the subprotocol %q next to %q)",
			bearerPrefix+"<token>", streamProtocol)
	case 1:
		return cred, isKey, nil
	default:
		return "", false, unauthorized(codeInvalidToken, "send one credential, not several (%s)", strings.Join(found, ", "))
	}
}

// checkAPIKey hashes key and compares it with every configured hash in
// constant time (no early exit: the time does not depend on which matched).
func (a *authenticator) checkAPIKey(key string) (*principal, *authError) {
	sum := sha256.Sum256([]byte(key))
	match := -1
	for i := range a.keys {
		if subtle.ConstantTimeCompare(sum[:], a.keys[i].SHA256[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return nil, unauthorized(codeInvalidAPIKey, "the API key is not valid")
	}
	k := a.keys[match]
	return &principal{tenant: k.Tenant, name: k.Name, method: "api_key", admin: k.Admin}, nil
}

// checkJWT verifies a token's algorithm, signature, exp, nbf, iat, iss and
// aud, and reads its tenant.
func (a *authenticator) checkJWT(token string) (*principal, *authError) {
	if a.jwt == nil {
		return nil, unauthorized(codeInvalidToken, "JWTs are not accepted here: use an API key")
	}
	claims := jwt.MapClaims{}
	_, err := a.jwt.ParseWithClaims(token, claims, a.key)
	if err == nil || errors.Is(err, jwt.ErrTokenInvalidClaims) { // the signature held
		if name := badNumericDate(claims); name != "" {
			return nil, unauthorized(codeInvalidToken, "the token's %s is not a NumericDate between 1970 and 9999", name)
		}
	}
	switch {
	case err == nil:
	case errors.Is(err, jwt.ErrTokenExpired):
		return nil, unauthorized(codeTokenExpired, "the token has expired")
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return nil, unauthorized(codeTokenNotYetValid, "the token is not valid yet (nbf or iat is in the future)")
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return nil, unauthorized(codeInvalidToken, "the token's issuer is not accepted")
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return nil, unauthorized(codeInvalidToken, "the token's audience is not accepted")
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return nil, unauthorized(codeInvalidToken, "the token lacks a required claim (exp)")
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return nil, unauthorized(codeInvalidToken, "the token's signature or algorithm is not accepted")
	default:
		return nil, unauthorized(codeInvalidToken, "the token is not valid")
	}
	tenant, _ := claims[a.claim].(string)
	if checkTenant(tenant) != nil {
		return nil, unauthorized(codeInvalidToken, "the token has no valid %q claim (its tenant)", a.claim)
	}
	sub, _ := claims["sub"].(string)
	admin, _ := claims[a.adminClaim].(bool)
	return &principal{tenant: tenant, name: sub, method: "jwt", admin: admin && a.adminClaim != ""}, nil
}

// key is the jwt.Keyfunc: the key for the token's algorithm. The parser has
// already refused algorithms without a configured key; the type switch
// makes sure an HMAC token never meets an RSA key, and the reverse.
func (a *authenticator) key(t *jwt.Token) (any, error) {
	switch t.Method.(type) {
	case *jwt.SigningMethodHMAC:
		if len(a.hs256) > 0 {
			return a.hs256, nil
		}
	case *jwt.SigningMethodRSA:
		set := a.rs256
		if a.jwks != nil {
			kid, _ := t.Header["kid"].(string)
			set = jwt.VerificationKeySet{Keys: append([]jwt.VerificationKey(nil), a.rs256.Keys...)}
			for _, k := range a.jwks.keysFor(kid) {
				set.Keys = append(set.Keys, k)
			}
		}
		if len(set.Keys) > 0 {
			return set, nil
		}
	}
	return nil, jwt.ErrTokenUnverifiable
}

// maxNumericDate is 9999-12-31T23:59:59Z in seconds: beyond it a
// NumericDate overflows time arithmetic (exp: 1e300 would read as long
// past, and be reported as expired rather than invalid).
const maxNumericDate = 253402300799

// badNumericDate names the first of exp, nbf and iat that is present but
// not a number of seconds from 0 to maxNumericDate, or returns "".
func badNumericDate(c jwt.MapClaims) string {
	for _, name := range []string{"exp", "nbf", "iat"} {
		v, ok := c[name]
		if !ok {
			continue
		}
		var f float64
		switch n := v.(type) {
		case float64:
			f = n
		case json.Number:
			var err error
			if f, err = n.Float64(); err != nil {
				return name
			}
		default:
			return name
		}
		if math.IsNaN(f) || f < 0 || f > maxNumericDate {
			return name
		}
	}
	return ""
}
