package api_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchboard-mcp/switchboard/api"
)

// jwksServer serves the public halves of keys under their kids, counting
// fetches; body, if set, is served instead.
type jwksServer struct {
	*httptest.Server
	fetches atomic.Int32
	keys    atomic.Value // map[string]*rsa.PublicKey
	body    atomic.Value // string
}

func newJWKSServer(t *testing.T) *jwksServer {
	j := &jwksServer{}
	j.keys.Store(map[string]*rsa.PublicKey{})
	j.body.Store("")
	j.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		j.fetches.Add(1)
		if b := j.body.Load().(string); b != "" {
			_, _ = w.Write([]byte(b))
			return
		}
		var doc struct {
			Keys []map[string]string `json:"keys"`
		}
		for kid, k := range j.keys.Load().(map[string]*rsa.PublicKey) {
			doc.Keys = append(doc.Keys, map[string]string{
				"kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid,
				"n": base64.RawURLEncoding.EncodeToString(k.N.Bytes()), "e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(k.E)).Bytes()),
			})
		}
		_ = json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(j.Close)
	return j
}

func signKid(t *testing.T, key *rsa.PrivateKey, kid string, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, c)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestJWKSKeysAreFetchedCachedAndRotated: RS256 keys come from the JWKS
// URL, are cached (one fetch for many requests), and a token naming a new
// key id makes the server fetch again (at most every 30 s).
func TestJWKSKeysAreFetchedCachedAndRotated(t *testing.T) {
	js := newJWKSServer(t)
	js.keys.Store(map[string]*rsa.PublicKey{"k1": &rsaKey().PublicKey})
	h := newHarness(t, withConfig(func(c *api.Config) {
		c.Auth = api.AuthConfig{Required: true, JWT: api.JWTConfig{JWKSURL: js.URL, Issuer: testIssuer, Audience: testAud}}
	}))
	now := h.clock.Now()
	get := func(tok string) int {
		resp, _ := h.doWith("GET", "/v1/intent-types", "", http.Header{"Authorization": {"Bearer " + tok}})
		return resp.StatusCode
	}
	tok := signKid(t, rsaKey(), "k1", claims(now, "acme", nil))
	for range 3 {
		if code := get(tok); code != http.StatusOK {
			t.Fatalf("JWKS token: %d", code)
		}
	}
	if n := js.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches for 3 requests, want 1", n)
	}
	// A rotated key: unknown kid → one more fetch, after the retry gap.
	k2, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	js.keys.Store(map[string]*rsa.PublicKey{"k1": &rsaKey().PublicKey, "k2": &k2.PublicKey})
	tok2 := signKid(t, k2, "k2", claims(now, "acme", nil))
	if code := get(tok2); code != http.StatusUnauthorized {
		t.Fatalf("a new kid within 30 s of the last fetch: %d, want 401 (no refetch yet)", code)
	}
	h.clock.Advance(31 * time.Second)
	tok2 = signKid(t, k2, "k2", claims(h.clock.Now(), "acme", nil))
	if code := get(tok2); code != http.StatusOK || js.fetches.Load() != 2 {
		t.Fatalf("rotated key: %d after %d fetches", code, js.fetches.Load())
	}
	// A key set that is too large is refused; the keys held stay.
	js.body.Store(`{"keys":[` + strings.Repeat(`{"kty":"oct"},`, api.MaxJWKSBytes/10) + `{}]}`)
	h.clock.Advance(11 * time.Minute)
	if code := get(signKid(t, rsaKey(), "k1", claims(h.clock.Now(), "acme", nil))); code != http.StatusOK {
		t.Fatalf("after an oversized JWKS: %d, want the held key to verify", code)
	}
}

// TestProtectedResourceMetadata: with JWTs accepted, the RFC 9728
// metadata is public and a 401 names it in WWW-Authenticate.
func TestProtectedResourceMetadata(t *testing.T) {
	h := newHarness(t, withAuth(func(a *api.AuthConfig) {
		a.JWT.Resource = "https://switchboard.example.com/mcp"
	}))
	for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		resp, body := h.do("GET", p, "")
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		if resp.StatusCode != http.StatusOK || m["resource"] != "https://switchboard.example.com/mcp" ||
			fmt.Sprint(m["authorization_servers"]) != "["+testIssuer+"]" {
			t.Fatalf("%s: %d %s", p, resp.StatusCode, body)
		}
	}
	resp, _ := h.do("POST", "/mcp", `{}`)
	want := `resource_metadata="https://switchboard.example.com/.well-known/oauth-protected-resource/mcp"`
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), want) {
		t.Fatalf("401: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	// With API keys only, there is no OAuth metadata.
	h2 := newHarness(t, withAuth(func(a *api.AuthConfig) { a.JWT = api.JWTConfig{} }))
	if resp, _ := h2.do("GET", "/.well-known/oauth-protected-resource", ""); resp.StatusCode/100 == 2 {
		t.Fatalf("metadata without JWTs: %d", resp.StatusCode)
	}
}
