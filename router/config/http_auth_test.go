package config_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/router/config"
)

const routes = "agents: {a: {}}\nintents: {e: {agent: a}}\n"

func publicKeyPEM(t *testing.T, bits int) string {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func indent(s, by string) string {
	return by + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+by)
}

func TestHTTPAuthParsesAndResolves(t *testing.T) {
	hash := sha256.Sum256([]byte("sk_batch_0123456789abcdef"))
	y := routes + `http:
  allowed_origins: [https://app.example.com, "*"]
  auth:
    api_keys:
      - {name: web, tenant: acme, key_env: SWITCHBOARD_API_KEY_WEB}
      - {name: batch, tenant: globex, key_sha256: ` + hex.EncodeToString(hash[:]) + `}
    jwt:
      hs256_secret_env: SWITCHBOARD_JWT_SECRET
      rs256_public_key_pem: |
` + indent(publicKeyPEM(t, 2048), "        ") + `
      issuer: https://auth.example.com/
      audience: switchboard
      tenant_claim: org
      leeway: 30s
    public_paths: [/healthz]
  websocket: {send_queue: 64, message_rate: 5.5, message_burst: 10, max_connections_per_tenant: 3, ping_period: 5s, pong_wait: 15s, max_replays: 8, max_replays_per_tenant: 2}
`
	env := map[string]string{
		"SWITCHBOARD_API_KEY_WEB": "sk_web_0123456789abcdef",
		"SWITCHBOARD_JWT_SECRET":  strings.Repeat("s", 32),
	}
	c, err := parse(t, y, env)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTP.Auth.Mode != config.AuthRequired || c.HTTP.WebSocket.MessageRate != 5.5 || c.HTTP.WebSocket.MaxConnectionsPerTenant != 3 ||
		c.HTTP.WebSocket.MaxReplays != 8 || c.HTTP.WebSocket.MaxReplaysPerTenant != 2 {
		t.Fatalf("http = %+v", c.HTTP)
	}
	r, err := c.ResolveAuth(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	web := sha256.Sum256([]byte(env["SWITCHBOARD_API_KEY_WEB"]))
	if !r.Required || len(r.APIKeys) != 2 || r.APIKeys[0].SHA256 != web || r.APIKeys[0].Tenant != "acme" || r.APIKeys[1].SHA256 != hash {
		t.Fatalf("api keys = %+v", r.APIKeys)
	}
	if string(r.HS256Secret) != env["SWITCHBOARD_JWT_SECRET"] || len(r.RS256PublicKeys) != 1 ||
		r.TenantClaim != "org" || r.Leeway != 30*time.Second || r.Issuer != "https://auth.example.com/" {
		t.Fatalf("jwt = %+v", r)
	}
	if len(r.PublicPaths) != 1 {
		t.Fatalf("public paths = %v", r.PublicPaths)
	}
}

func TestHTTPAuthDefaultsToRequired(t *testing.T) {
	c, err := parse(t, routes, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTP.Auth.Mode != config.AuthRequired {
		t.Fatalf("mode = %q", c.HTTP.Auth.Mode)
	}
	// Nothing configured: the API could serve no one, so serving refuses.
	_, err = c.ResolveAuth(nil, os.ReadFile)
	if err == nil || !strings.Contains(err.Error(), "sb.yaml: http.auth: authentication is required but no credential is configured") {
		t.Fatalf("ResolveAuth = %v", err)
	}
	off, err := parse(t, routes+"http: {auth: {mode: off}}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := off.ResolveAuth(nil, os.ReadFile); err != nil || r.Required {
		t.Fatalf("mode off: %+v %v", r, err)
	}
}

func TestHTTPAuthErrorsNameFileLineAndKey(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"mode", "http:\n  auth:\n    mode: maybe\n", `sb.yaml:3: http.auth.mode: "maybe" is not an auth mode`},
		{"both key sources", "http:\n  auth:\n    api_keys:\n      - name: k\n        tenant: t\n        key_env: K\n        key_sha256: " + strings.Repeat("a", 64) + "\n", `sb.yaml:6: http.auth.api_keys.0.key_env: give one of key_env`},
		{"no key source", "http:\n  auth:\n    api_keys:\n      - {name: k, tenant: t}\n", `sb.yaml:4: http.auth.api_keys.0.key_env: give one of key_env`},
		{"bad hash", "http:\n  auth:\n    api_keys:\n      - {name: k, tenant: t, key_sha256: abc}\n", `http.auth.api_keys.0.key_sha256: must be 64 hex digits`},
		{"no tenant", "http:\n  auth:\n    api_keys:\n      - {name: k, key_env: K}\n", `sb.yaml:4: http.auth.api_keys.0.tenant: required: the tenant`},
		{"duplicate name", "http:\n  auth:\n    api_keys:\n      - {name: k, tenant: t, key_env: A}\n      - {name: k, tenant: t, key_env: B}\n", `sb.yaml:5: http.auth.api_keys.1.name: "k" is the name of another key`},
		{"bad env name", "http:\n  auth:\n    api_keys:\n      - {name: k, tenant: t, key_env: not-a-var}\n", `http.auth.api_keys.0.key_env: "not-a-var" is not an environment variable name`},
		{"empty jwt", "http:\n  auth:\n    jwt: {issuer: x}\n", `sb.yaml:3: http.auth.jwt: give hs256_secret_env`},
		{"two rsa keys", "http:\n  auth:\n    jwt:\n      rs256_public_key_file: a.pem\n      rs256_public_key_pem: x\n", `sb.yaml:5: http.auth.jwt.rs256_public_key_pem: give rs256_public_key_file or rs256_public_key_pem, not both`},
		{"bad leeway", "http:\n  auth:\n    jwt:\n      hs256_secret_env: S\n      leeway: soon\n", `sb.yaml:5: http.auth.jwt.leeway: "soon" is not a duration`},
		{"unknown key", "http:\n  auth:\n    api_key: []\n", `sb.yaml:3: http.auth.api_key: unknown key "api_key"`},
		{"public path", "http:\n  auth:\n    public_paths: [healthz]\n", `http.auth.public_paths.0: "healthz" is not a path`},
		{"public data path", "http:\n  auth:\n    public_paths: [/healthz, /v1/stream]\n", `http.auth.public_paths.1: "/v1/stream" serves tenants' data and cannot be public`},
		{"origin", "http:\n  allowed_origins:\n    - app.example.com\n", `sb.yaml:3: http.allowed_origins.0: "app.example.com" is not an origin`},
		{"negative rate", "http:\n  websocket:\n    message_rate: -1\n", `sb.yaml:3: http.websocket.message_rate: must not be negative`},
		{"NaN rate", "http:\n  websocket:\n    message_rate: .nan\n", `sb.yaml:3: http.websocket.message_rate: must be a number`},
		{"negative replays", "http:\n  websocket:\n    max_replays_per_tenant: -2\n", `sb.yaml:3: http.websocket.max_replays_per_tenant: must not be negative`},
		{"ping after pong", "http:\n  websocket: {ping_period: 1m, pong_wait: 30s}\n", `http.websocket.ping_period: 1m0s is not shorter than pong_wait 30s`},
		{"negative queue bytes", "http:\n  websocket:\n    send_queue_bytes: -1\n", `sb.yaml:3: http.websocket.send_queue_bytes: must not be negative`},
		{"tiny results budget", "http:\n  results_max_bytes: 1000\n", `sb.yaml:2: http.results_max_bytes: 1000 bytes is too small: at least 65536`},
		{"negative body limit", "http:\n  max_body_bytes: -5\n", `sb.yaml:2: http.max_body_bytes: must not be negative`},
		{"tiny header limit", "http:\n  max_header_bytes: 100\n", `sb.yaml:2: http.max_header_bytes: 100 bytes is too small`},
		{"negative body timeout", "http:\n  body_read_timeout: -1s\n", `sb.yaml:2: http.body_read_timeout: "-1s" is negative`},
		{"bad idle timeout", "http:\n  idle_timeout: forever\n", `sb.yaml:2: http.idle_timeout: "forever" is not a duration`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("sb.yaml", []byte(tc.yaml+routes), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("error:\n%v\nwant:\n%s", err, tc.want)
			}
		})
	}
}

func TestResolveAuthErrorsNameFileLineAndKey(t *testing.T) {
	y := `http:
  auth:
    api_keys:
      - {name: web, tenant: acme, key_env: SWITCHBOARD_API_KEY_WEB}
      - {name: short, tenant: acme, key_env: SHORT_KEY}
    jwt:
      hs256_secret_env: SWITCHBOARD_JWT_SECRET
      rs256_public_key_file: /nonexistent/jwt.pem
` + routes
	c, err := config.Parse("sb.yaml", []byte(y), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ResolveAuth(func(k string) (string, bool) {
		if k == "SHORT_KEY" {
			return "abc", true
		}
		return "", false
	}, os.ReadFile)
	for _, want := range []string{
		"sb.yaml:4: http.auth.api_keys.0.key_env: environment variable SWITCHBOARD_API_KEY_WEB is not set",
		"sb.yaml:5: http.auth.api_keys.1.key_env: the key in SHORT_KEY has 3 bytes; use at least 16",
		"sb.yaml:7: http.auth.jwt.hs256_secret_env: environment variable SWITCHBOARD_JWT_SECRET is not set",
		"sb.yaml:8: http.auth.jwt.rs256_public_key_file: open /nonexistent/jwt.pem",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error:\n%v\nwant it to contain:\n%s", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "abc") {
		t.Fatalf("the error shows a secret: %v", err)
	}

	for name, tc := range map[string]struct{ pem, want string }{
		"not PEM":     {"hello", "not a PEM block"},
		"small key":   {publicKeyPEM(t, 1024), "1024 bits"},
		"private key": {"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", `"PRIVATE KEY" block`},
	} {
		y := "http:\n  auth:\n    jwt:\n      rs256_public_key_pem: |\n" + indent(tc.pem, "        ") + "\n" + routes
		c, err := config.Parse("sb.yaml", []byte(y), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ResolveAuth(nil, os.ReadFile); err == nil || !strings.Contains(err.Error(), "sb.yaml:4: http.auth.jwt.rs256_public_key_pem: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
