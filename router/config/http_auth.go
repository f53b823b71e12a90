package config

import (
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/intents"
)

// Auth modes (http.auth.mode).
const (
	AuthRequired = "required" // the default: every API request needs a credential
	AuthOff      = "off"      // no authentication: 'switchboard dev', or 'serve --insecure-no-auth'
)

// HTTPAuth is http.auth: who may call the API, and as which tenant. Secrets
// are never written in the file: API keys and the HS256 secret come from
// environment variables named here (or an API key's SHA-256), so the file
// can be checked in.
type HTTPAuth struct {
	// Mode is required (the default) or off. 'serve' refuses to start with
	// off unless given --insecure-no-auth; 'switchboard dev' runs with
	// authentication off unless given --auth.
	Mode string `yaml:"mode"`
	// APIKeys are the accepted API keys, each acting for one tenant.
	APIKeys []*APIKey `yaml:"api_keys"`
	// JWT verifies JWTs (HS256 and/or RS256).
	JWT *JWT `yaml:"jwt"`
	// PublicPaths are served without a credential. Default /healthz,
	// /readyz, /metrics and /v1/openapi.json (api.DefaultPublicPaths); []
	// makes every path need one.
	PublicPaths []string `yaml:"public_paths"`
}

// APIKey is one API key: its tenant, and where its value is (key_env) or its
// SHA-256 in hex (key_sha256).
type APIKey struct {
	Name      string `yaml:"name"`
	Tenant    string `yaml:"tenant"`
	KeyEnv    string `yaml:"key_env"`
	KeySHA256 string `yaml:"key_sha256"`
	// Admin lets the key call the admin endpoints (POST /v1/admin/reload)
	// besides acting for its tenant. Default false.
	Admin bool `yaml:"admin"`
}

// JWT says how tokens are verified: HS256 with a secret from the
// environment, RS256 with a public key in the file or a file of its own.
type JWT struct {
	HS256SecretEnv     string `yaml:"hs256_secret_env"`
	RS256PublicKeyFile string `yaml:"rs256_public_key_file"`
	RS256PublicKeyPEM  string `yaml:"rs256_public_key_pem"`
	Issuer             string `yaml:"issuer"`
	Audience           string `yaml:"audience"`
	TenantClaim        string `yaml:"tenant_claim"` // default "tenant"
	// AdminClaim names a boolean claim: a token where it is true may call
	// the admin endpoints (POST /v1/admin/reload). Empty: no token may.
	AdminClaim string   `yaml:"admin_claim"`
	Leeway     Duration `yaml:"leeway"`
	// JWKSURL is where RS256 keys are fetched (a JWKS document), cached and
	// refreshed every JWKSRefresh (default 10m) and on an unknown key id.
	JWKSURL     string   `yaml:"jwks_url"`
	JWKSRefresh Duration `yaml:"jwks_refresh"`
	// Resource is the MCP endpoint's resource identifier for the
	// protected-resource metadata (RFC 9728), e.g.
	// https://switchboard.example.com/mcp; default: the request's origin.
	Resource string `yaml:"resource"`
	// AuthorizationServers are named in that metadata; default: issuer.
	AuthorizationServers []string `yaml:"authorization_servers"`
}

// WebSocket is http.websocket: the limits of the /v1/stream connections.
// Zero values take the API's defaults (see the README). SendQueueBytes
// bounds the bytes waiting for one slow reader: a WebSocket client's send
// queue, an event stream's progress records, an MCP call's progress
// reports (mcp.WatchProgress); the memory budget counts StreamQueuesCounted
// of them.
type WebSocket struct {
	SendQueue      int      `yaml:"send_queue"`
	SendQueueBytes int      `yaml:"send_queue_bytes"`
	PingPeriod     Duration `yaml:"ping_period"`
	PongWait       Duration `yaml:"pong_wait"`
	// WriteWait bounds one write to any streaming client: a WebSocket
	// client's (then 1013), and every write of an event stream, of an
	// answer to POST /v1/intents (?wait) or GET /v1/intents/{id}, and of
	// the MCP endpoint's answers and streams (then the connection is
	// closed; switchboard_api_write_timeouts_total).
	WriteWait               Duration `yaml:"write_wait"`
	MaxMessageBytes         int64    `yaml:"max_message_bytes"`
	MaxSubscriptions        int      `yaml:"max_subscriptions"`
	MessageRate             float64  `yaml:"message_rate"`
	MessageBurst            int      `yaml:"message_burst"`
	MaxConnectionsPerTenant int      `yaml:"max_connections_per_tenant"`
	// MaxConnections caps the stream connections (WebSocket and event
	// streams) of one instance, every tenant's and unauthenticated ones.
	MaxConnections int `yaml:"max_connections"`
	// MaxReplays caps the resumes reading history from Kafka at once on one
	// instance, MaxReplaysPerTenant those of one tenant.
	MaxReplays          int `yaml:"max_replays"`
	MaxReplaysPerTenant int `yaml:"max_replays_per_tenant"`
}

// Limits of secrets read from the environment.
const (
	MinAPIKeyBytes      = 16
	MinHS256SecretBytes = 32
)

var (
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	sha256RE  = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
)

func (c *Config) setHTTPDefaults() {
	c.setWaitingDefaults() // http_limits.go
	if c.HTTP.Auth.Mode == "" {
		c.HTTP.Auth.Mode = AuthRequired
	}
	if j := c.HTTP.Auth.JWT; j != nil && j.TenantClaim == "" {
		j.TenantClaim = "tenant"
	}
}

// validateHTTP checks http.allowed_origins, http.auth and http.websocket as
// written (secrets are read later, by ResolveAuth).
func (c *Config) validateHTTP() Errors {
	var errs Errors
	add := func(msg string, path ...string) {
		errs = append(errs, c.ErrorAt(msg, path...))
	}
	for i, o := range c.HTTP.AllowedOrigins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			add(fmt.Sprintf("%q is not an origin like https://app.example.com[:port] or *", o), "http", "allowed_origins", strconv.Itoa(i))
		}
	}
	a := &c.HTTP.Auth
	switch a.Mode {
	case AuthRequired, AuthOff:
	default:
		add(fmt.Sprintf("%q is not an auth mode: use required or off", a.Mode), "http", "auth", "mode")
	}
	names := map[string]bool{}
	for i, k := range a.APIKeys {
		p := func(key string) []string { return []string{"http", "auth", "api_keys", strconv.Itoa(i), key} }
		if k == nil {
			add("empty: give name, tenant and key_env or key_sha256", p("")[:4]...)
			continue
		}
		switch {
		case k.Name == "":
			add("required: a name for logs", p("name")...)
		case names[k.Name]:
			add(fmt.Sprintf("%q is the name of another key", k.Name), p("name")...)
		}
		names[k.Name] = true
		if !intents.ValidLabel(k.Tenant) {
			add("required: the tenant the key acts for (printable, no spaces)", p("tenant")...)
		}
		switch {
		case (k.KeyEnv == "") == (k.KeySHA256 == ""):
			add("give one of key_env (an environment variable holding the key) or key_sha256 (the key's SHA-256 in hex)", p("key_env")...)
		case k.KeyEnv != "" && !envNameRE.MatchString(k.KeyEnv):
			add(fmt.Sprintf("%q is not an environment variable name", k.KeyEnv), p("key_env")...)
		case k.KeySHA256 != "" && !sha256RE.MatchString(k.KeySHA256):
			add("must be 64 hex digits: printf %s \"$KEY\" | sha256sum", p("key_sha256")...)
		}
	}
	if j := a.JWT; j != nil {
		p := func(key string) []string { return []string{"http", "auth", "jwt", key} }
		if j.HS256SecretEnv == "" && j.RS256PublicKeyFile == "" && j.RS256PublicKeyPEM == "" && j.JWKSURL == "" {
			add("give hs256_secret_env, rs256_public_key_file, rs256_public_key_pem or jwks_url", "http", "auth", "jwt")
		}
		if u, err := url.Parse(j.JWKSURL); j.JWKSURL != "" && (err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "") {
			add(fmt.Sprintf("%q is not an http(s) URL", j.JWKSURL), p("jwks_url")...)
		}
		if u, err := url.Parse(j.Resource); j.Resource != "" && (err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "") {
			add(fmt.Sprintf("%q is not an http(s) URL such as https://switchboard.example.com/mcp", j.Resource), p("resource")...)
		}
		if j.HS256SecretEnv != "" && !envNameRE.MatchString(j.HS256SecretEnv) {
			add(fmt.Sprintf("%q is not an environment variable name", j.HS256SecretEnv), p("hs256_secret_env")...)
		}
		if j.RS256PublicKeyFile != "" && j.RS256PublicKeyPEM != "" {
			add("give rs256_public_key_file or rs256_public_key_pem, not both", p("rs256_public_key_pem")...)
		}
	}
	for i, path := range a.PublicPaths {
		if !strings.HasPrefix(path, "/") {
			add(fmt.Sprintf("%q is not a path (it starts with /)", path), "http", "auth", "public_paths", strconv.Itoa(i))
		}
		// The API's data routes (it checks this too): without a credential
		// there is no tenant to scope them to.
		if (strings.HasPrefix(path, "/v1/") && path != "/v1/openapi.json") || path == "/mcp" {
			add(fmt.Sprintf("%q serves tenants' data and cannot be public (for a local try-out, use dev, which runs without authentication)", path), "http", "auth", "public_paths", strconv.Itoa(i))
		}
	}
	ws := c.HTTP.WebSocket
	for _, f := range []struct {
		key string
		v   float64
	}{
		{"send_queue", float64(ws.SendQueue)},
		{"send_queue_bytes", float64(ws.SendQueueBytes)},
		{"max_message_bytes", float64(ws.MaxMessageBytes)},
		{"max_subscriptions", float64(ws.MaxSubscriptions)},
		{"message_rate", ws.MessageRate},
		{"message_burst", float64(ws.MessageBurst)},
		{"max_connections_per_tenant", float64(ws.MaxConnectionsPerTenant)},
		{"max_connections", float64(ws.MaxConnections)},
		{"max_replays", float64(ws.MaxReplays)},
		{"max_replays_per_tenant", float64(ws.MaxReplaysPerTenant)},
	} {
		switch {
		case math.IsNaN(f.v) || math.IsInf(f.v, 0):
			add("must be a number (0 or absent: the default)", "http", "websocket", f.key)
		case f.v < 0:
			add("must not be negative (0 or absent: the default)", "http", "websocket", f.key)
		}
	}
	if ws.PingPeriod > 0 && ws.PongWait > 0 && ws.PingPeriod >= ws.PongWait {
		add(fmt.Sprintf("%s is not shorter than pong_wait %s", ws.PingPeriod, ws.PongWait), "http", "websocket", "ping_period")
	}
	return append(errs, c.validateHTTPLimits()...)
}

// ErrorAt returns a configuration error at the key path (numbers index
// lists), with the line of that key in the file if it is there.
func (c *Config) ErrorAt(msg string, path ...string) *Error {
	var clean []string
	for _, p := range path {
		if p != "" {
			clean = append(clean, p)
		}
	}
	e := &Error{File: c.file, Key: strings.Join(clean, "."), Msg: msg}
	if c.root != nil {
		e.Line = lineOf(c.root, clean...)
	}
	return e
}

// ResolvedAuth is http.auth with its secrets read: what the API needs.
type ResolvedAuth struct {
	Required        bool
	APIKeys         []ResolvedAPIKey
	HS256Secret     []byte
	RS256PublicKeys []*rsa.PublicKey
	Issuer          string
	Audience        string
	TenantClaim     string
	AdminClaim      string
	Leeway          time.Duration
	PublicPaths     []string // nil: the API's default

	JWKSURL              string
	JWKSRefresh          time.Duration
	Resource             string
	AuthorizationServers []string
}

// ResolvedAPIKey is an API key's name, tenant and SHA-256.
type ResolvedAPIKey struct {
	Name   string
	Tenant string
	SHA256 [32]byte
	Admin  bool
}

// ResolveAuth reads the secrets http.auth names: API keys and the HS256
// secret from the environment (lookupEnv), the RS256 public key from the
// file or from rs256_public_key_file (readFile). Only what serves the API
// calls it, so other commands run without the secrets. Errors name the file,
// line and key. With mode off it returns Required false and reads nothing.
func (c *Config) ResolveAuth(lookupEnv func(string) (string, bool), readFile func(string) ([]byte, error)) (*ResolvedAuth, error) {
	a := c.HTTP.Auth
	if a.Mode == AuthOff {
		return &ResolvedAuth{}, nil
	}
	var errs Errors
	add := func(msg string, path ...string) { errs = append(errs, c.ErrorAt(msg, path...)) }
	env := func(name string) (string, bool) {
		if lookupEnv == nil {
			return "", false
		}
		v, ok := lookupEnv(name)
		return v, ok && v != ""
	}
	r := &ResolvedAuth{Required: true, PublicPaths: a.PublicPaths, TenantClaim: "tenant"}
	for i, k := range a.APIKeys {
		rk := ResolvedAPIKey{Name: k.Name, Tenant: k.Tenant, Admin: k.Admin}
		if k.KeyEnv != "" {
			v, ok := env(k.KeyEnv)
			switch {
			case !ok:
				add(fmt.Sprintf("environment variable %s is not set (it holds the key)", k.KeyEnv), "http", "auth", "api_keys", strconv.Itoa(i), "key_env")
			case len(v) < MinAPIKeyBytes:
				add(fmt.Sprintf("the key in %s has %d bytes; use at least %d (openssl rand -hex 32)", k.KeyEnv, len(v), MinAPIKeyBytes), "http", "auth", "api_keys", strconv.Itoa(i), "key_env")
			}
			rk.SHA256 = sha256.Sum256([]byte(v))
		} else {
			b, _ := hex.DecodeString(k.KeySHA256)
			copy(rk.SHA256[:], b)
		}
		r.APIKeys = append(r.APIKeys, rk)
	}
	if j := a.JWT; j != nil {
		r.Issuer, r.Audience, r.TenantClaim, r.AdminClaim, r.Leeway = j.Issuer, j.Audience, j.TenantClaim, j.AdminClaim, j.Leeway.D()
		r.JWKSURL, r.JWKSRefresh, r.Resource, r.AuthorizationServers = j.JWKSURL, j.JWKSRefresh.D(), j.Resource, j.AuthorizationServers
		if j.HS256SecretEnv != "" {
			v, ok := env(j.HS256SecretEnv)
			switch {
			case !ok:
				add(fmt.Sprintf("environment variable %s is not set (it holds the HS256 secret)", j.HS256SecretEnv), "http", "auth", "jwt", "hs256_secret_env")
			case len(v) < MinHS256SecretBytes:
				add(fmt.Sprintf("the secret in %s has %d bytes; HS256 needs at least %d", j.HS256SecretEnv, len(v), MinHS256SecretBytes), "http", "auth", "jwt", "hs256_secret_env")
			}
			r.HS256Secret = []byte(v)
		}
		pemText, key := []byte(j.RS256PublicKeyPEM), "rs256_public_key_pem"
		if j.RS256PublicKeyFile != "" {
			key = "rs256_public_key_file"
			b, err := readFile(j.RS256PublicKeyFile)
			if err != nil {
				add(err.Error(), "http", "auth", "jwt", key)
			}
			pemText = b
		}
		if len(pemText) > 0 {
			k, err := parseRSAPublicKey(pemText)
			if err != nil {
				add(err.Error(), "http", "auth", "jwt", key)
			} else {
				r.RS256PublicKeys = []*rsa.PublicKey{k}
			}
		}
	}
	if len(a.APIKeys) == 0 && a.JWT == nil {
		add("authentication is required but no credential is configured: add api_keys or jwt under http.auth (or, for a trial, mode: off and 'serve --insecure-no-auth')", "http", "auth")
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return r, nil
}

// parseRSAPublicKey reads a PEM "PUBLIC KEY" (PKIX) or "RSA PUBLIC KEY"
// (PKCS #1) block holding an RSA key of at least 2048 bits.
func parseRSAPublicKey(b []byte) (*rsa.PublicKey, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("not a PEM block: want -----BEGIN PUBLIC KEY-----")
	}
	var k *rsa.PublicKey
	switch block.Type {
	case "PUBLIC KEY":
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("not a public key: %v", err)
		}
		rk, ok := pub.(*rsa.PublicKey)
		if !ok {
			return nil, fmt.Errorf("a %T, not an RSA public key (RS256 needs RSA)", pub)
		}
		k = rk
	case "RSA PUBLIC KEY":
		rk, err := x509.ParsePKCS1PublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("not an RSA public key: %v", err)
		}
		k = rk
	default:
		return nil, fmt.Errorf("a PEM %q block, not PUBLIC KEY (give the public key, never the private one)", block.Type)
	}
	if k.N.BitLen() < 2048 {
		return nil, fmt.Errorf("an RSA key of %d bits: use at least 2048", k.N.BitLen())
	}
	return k, nil
}
