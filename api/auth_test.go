package api_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/gorilla/websocket"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/apitest"
)

// Credentials of the auth tests: two API keys of two tenants, an HS256
// secret and an RSA key pair.
const (
	keyAcme    = "sk_acme_0123456789abcdef"
	keyGlobex  = "sk_globex_0123456789abcdef"
	testIssuer = "https://auth.example.com/"
	testAud    = "switchboard"
)

var hsSecret = []byte("an-hs256-secret-of-at-least-32-bytes!")

// rsaKey is generated once per test binary (2048 bits take a while).
var rsaKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

func rsaPublicPEM(t *testing.T) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(&rsaKey().PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func testAuth() api.AuthConfig {
	return api.AuthConfig{
		Required: true,
		APIKeys: []api.Key{
			{Name: "acme-web", Tenant: "acme", SHA256: sha256.Sum256([]byte(keyAcme))},
			{Name: "globex-web", Tenant: "globex", SHA256: sha256.Sum256([]byte(keyGlobex))},
		},
		JWT: api.JWTConfig{
			HS256Secret:     hsSecret,
			RS256PublicKeys: []*rsa.PublicKey{&rsaKey().PublicKey},
			Issuer:          testIssuer,
			Audience:        testAud,
		},
	}
}

func withAuth(f func(*api.AuthConfig)) harnessOpt {
	return withConfig(func(c *api.Config) {
		c.Auth = testAuth()
		if f != nil {
			f(&c.Auth)
		}
	})
}

// claims returns valid claims for tenant at now, changed by edit.
func claims(now time.Time, tenant string, edit func(jwt.MapClaims)) jwt.MapClaims {
	c := jwt.MapClaims{
		"iss":    testIssuer,
		"aud":    testAud,
		"sub":    "user-1",
		"tenant": tenant,
		"iat":    now.Add(-time.Minute).Unix(),
		"nbf":    now.Add(-time.Minute).Unix(),
		"exp":    now.Add(time.Hour).Unix(),
	}
	if edit != nil {
		edit(c)
	}
	return c
}

func sign(t *testing.T, m jwt.SigningMethod, key any, c jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// doWith sends a request with headers and returns the response with its
// body read.
func (h *harness) doWith(method, path, body string, hdr http.Header) (*http.Response, []byte) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.ts.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	resp, err := h.ts.Client().Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp, b
}

// tryDial opens /v1/stream (with query, if not empty); on a refused
// handshake it returns the response with its body read.
func (h *harness) tryDial(query string, hdr http.Header, protocols ...string) (*websocket.Conn, *http.Response, []byte) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	d := websocket.Dialer{Subprotocols: protocols, HandshakeTimeout: testTimeout}
	conn, resp, err := d.DialContext(ctx, "ws"+strings.TrimPrefix(h.ts.URL, "http")+"/v1/stream"+query, hdr)
	if err == nil {
		h.t.Cleanup(func() { _ = conn.Close() })
		return conn, resp, nil
	}
	if resp == nil {
		h.t.Fatalf("dial: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return nil, resp, b
}

func bearer(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

// TestAuthMatrix checks every kind of credential, good and bad, on a plain
// request (POST /v1/intents) and on the WebSocket upgrade: the status, the
// JSON error code, WWW-Authenticate on 401, and the failure counter.
func TestAuthMatrix(t *testing.T) {
	h := newHarness(t, withAuth(nil), withConfig(func(c *api.Config) {
		c.AllowedOrigins = []string{"https://app.example.com"}
	}))
	now := h.clock.Now()
	pubPEM := rsaPublicPEM(t)
	otherRSA, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	hs := func(edit func(jwt.MapClaims)) string {
		return sign(t, jwt.SigningMethodHS256, hsSecret, claims(now, "acme", edit))
	}
	rs := func(edit func(jwt.MapClaims)) string {
		return sign(t, jwt.SigningMethodRS256, rsaKey(), claims(now, "acme", edit))
	}
	none := sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims(now, "acme", nil))
	with := func(hdr http.Header, k, v string) http.Header {
		hdr = hdr.Clone()
		hdr.Set(k, v)
		return hdr
	}

	cases := []struct {
		name      string
		hdr       http.Header
		protocols []string // WebSocket subprotocols (the upgrade only)
		path      string   // query appended to the path
		status    int      // 0: accepted (202 on POST, 101 on the upgrade)
		code      string
		httpOnly  bool
		wsOnly    bool
	}{
		{name: "no credential", status: 401, code: "unauthenticated"},
		{name: "token only in the query string", path: "?access_token=" + keyAcme, status: 401, code: "unauthenticated"},
		{name: "API key as bearer", hdr: bearer(keyAcme)},
		{name: "API key in X-API-Key", hdr: http.Header{"X-Api-Key": {keyAcme}}},
		{name: "API key as a subprotocol", protocols: []string{"switchboard.v1", "bearer." + keyAcme}, wsOnly: true},
		{name: "subprotocol ignored outside the upgrade", hdr: http.Header{"Sec-Websocket-Protocol": {"switchboard.v1, bearer." + keyAcme}}, status: 401, code: "unauthenticated", httpOnly: true},
		{name: "unknown API key", hdr: bearer("sk_nobody_0123456789abcdef"), status: 401, code: "invalid_api_key"},
		{name: "unknown API key in X-API-Key", hdr: http.Header{"X-Api-Key": {"sk_nobody"}}, status: 401, code: "invalid_api_key"},
		{name: "two credentials", hdr: with(bearer(keyAcme), "X-Api-Key", keyAcme), status: 401, code: "invalid_token"},
		// A proxy in front may read the other one: which tenant acts is
		// never a matter of which header a parser takes.
		{name: "two Authorization headers", hdr: http.Header{"Authorization": {"Bearer " + keyAcme, "Bearer " + keyGlobex}}, status: 401, code: "invalid_token"},
		{name: "two Authorization headers, the second empty", hdr: http.Header{"Authorization": {"Bearer " + keyAcme, ""}}, status: 401, code: "invalid_token"},
		{name: "two X-API-Key headers", hdr: http.Header{"X-Api-Key": {keyAcme, keyGlobex}}, status: 401, code: "invalid_token"},
		{name: "two bearer subprotocols", protocols: []string{"switchboard.v1", "bearer." + keyAcme, "bearer." + keyGlobex}, status: 401, code: "invalid_token", wsOnly: true},
		{name: "basic auth", hdr: http.Header{"Authorization": {"Basic YTpi"}}, status: 401, code: "invalid_token"},
		{name: "HS256 JWT", hdr: bearer(hs(nil))},
		{name: "RS256 JWT", hdr: bearer(rs(nil))},
		{name: "RS256 JWT as a subprotocol", protocols: []string{"switchboard.v1", "bearer." + rs(nil)}, wsOnly: true},
		{name: "expired", hdr: bearer(hs(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Second).Unix() })), status: 401, code: "token_expired"},
		{name: "not yet valid", hdr: bearer(rs(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Minute).Unix() })), status: 401, code: "token_not_yet_valid"},
		{name: "issued in the future", hdr: bearer(rs(func(c jwt.MapClaims) { c["iat"] = now.Add(time.Minute).Unix() })), status: 401, code: "token_not_yet_valid"},
		{name: "no exp", hdr: bearer(hs(func(c jwt.MapClaims) { delete(c, "exp") })), status: 401, code: "invalid_token"},
		{name: "bad HS256 signature", hdr: bearer(sign(t, jwt.SigningMethodHS256, []byte("another-secret-of-at-least-32-bytes!!"), claims(now, "acme", nil))), status: 401, code: "invalid_token"},
		{name: "bad RS256 signature", hdr: bearer(sign(t, jwt.SigningMethodRS256, otherRSA, claims(now, "acme", nil))), status: 401, code: "invalid_token"},
		{name: "tampered claims", hdr: bearer(tamper(t, hs(nil))), status: 401, code: "invalid_token"},
		{name: "alg none", hdr: bearer(none), status: 401, code: "invalid_token"},
		{name: "HS256 signed with the RS256 public key", hdr: bearer(sign(t, jwt.SigningMethodHS256, pubPEM, claims(now, "acme", nil))), status: 401, code: "invalid_token"},
		{name: "HS512", hdr: bearer(sign(t, jwt.SigningMethodHS512, hsSecret, claims(now, "acme", nil))), status: 401, code: "invalid_token"},
		{name: "wrong issuer", hdr: bearer(hs(func(c jwt.MapClaims) { c["iss"] = "https://evil.example.com/" })), status: 401, code: "invalid_token"},
		{name: "wrong audience", hdr: bearer(rs(func(c jwt.MapClaims) { c["aud"] = "someone-else" })), status: 401, code: "invalid_token"},
		{name: "no tenant claim", hdr: bearer(hs(func(c jwt.MapClaims) { delete(c, "tenant") })), status: 401, code: "invalid_token"},
		{name: "tenant claim not a string", hdr: bearer(hs(func(c jwt.MapClaims) { c["tenant"] = 7 })), status: 401, code: "invalid_token"},
		{name: "garbage bearer JWT", hdr: bearer("a.b.c"), status: 401, code: "invalid_token"},
		{name: "allowed origin", hdr: with(bearer(keyAcme), "Origin", "https://app.example.com")},
		{name: "same origin", hdr: with(bearer(keyAcme), "Origin", h.ts.URL)},
		{name: "wrong origin", hdr: with(bearer(keyAcme), "Origin", "https://evil.example.com"), status: 403, code: "forbidden_origin"},
		{name: "wrong origin without credential", hdr: http.Header{"Origin": {"https://evil.example.com"}}, status: 403, code: "forbidden_origin"},
		{name: "wrong tenant in the body", hdr: bearer(keyGlobex), status: 403, code: "forbidden_tenant", httpOnly: true},
	}
	failures := 0.0
	for _, tc := range cases {
		t.Run("http/"+tc.name, func(t *testing.T) {
			if tc.wsOnly {
				t.Skip("a WebSocket-only credential")
			}
			resp, body := h.doWith("POST", "/v1/intents"+tc.path, `{"intent_type":"echo","payload":{},"tenant":"acme"}`, tc.hdr)
			if tc.status == 0 {
				if resp.StatusCode != http.StatusAccepted {
					t.Fatalf("status %d, want 202: %s", resp.StatusCode, body)
				}
				return
			}
			wantRefusal(t, resp, body, tc.status, tc.code)
			if tc.code != "forbidden_tenant" {
				failures++
			}
		})
		t.Run("ws/"+tc.name, func(t *testing.T) {
			if tc.httpOnly {
				t.Skip("not about the upgrade")
			}
			conn, resp, body := h.tryDial(tc.path, tc.hdr, tc.protocols...)
			if tc.status == 0 {
				if conn == nil {
					t.Fatalf("upgrade refused: %d %s", resp.StatusCode, body)
				}
				if len(tc.protocols) > 0 && conn.Subprotocol() != "switchboard.v1" {
					t.Fatalf("selected subprotocol %q, want switchboard.v1 (never the token)", conn.Subprotocol())
				}
				if p := resp.Header.Get("Sec-Websocket-Protocol"); strings.Contains(p, "bearer") {
					t.Fatalf("the server echoed the token: %q", p)
				}
				c := &wsClient{t: t, conn: conn}
				c.subscribe(`{"session_id":"s"}`)
				return
			}
			if conn != nil {
				t.Fatal("upgrade accepted")
			}
			wantRefusal(t, resp, body, tc.status, tc.code)
			failures++
		})
	}
	if got := metricValue(t, h.reg, "switchboard_auth_failures_total"); got != failures {
		t.Fatalf("switchboard_auth_failures_total = %v, want %v", got, failures)
	}
	if got := metricValue(t, h.reg, "switchboard_auth_disabled"); got != 0 {
		t.Fatalf("switchboard_auth_disabled = %v with auth on", got)
	}
}

// wantRefusal checks a 401, 403 or 429: JSON with the code, and on 401 a
// WWW-Authenticate challenge.
func wantRefusal(t *testing.T, resp *http.Response, body []byte, status int, code string) {
	t.Helper()
	wantError(t, resp, body, status, code, fieldOf(code))
	wa := resp.Header.Get("WWW-Authenticate")
	switch {
	case status == http.StatusUnauthorized && !strings.HasPrefix(wa, `Bearer realm="switchboard"`):
		t.Fatalf("401 with WWW-Authenticate %q", wa)
	case status == http.StatusUnauthorized && code != "unauthenticated" && !strings.Contains(wa, `error="invalid_token"`):
		t.Fatalf("WWW-Authenticate %q lacks the error", wa)
	case status != http.StatusUnauthorized && wa != "":
		t.Fatalf("%d with WWW-Authenticate %q", status, wa)
	}
	for _, secret := range []string{keyAcme, keyGlobex, "eyJ"} {
		if strings.Contains(string(body), secret) {
			t.Fatalf("the answer repeats the credential: %s", body)
		}
	}
}

func fieldOf(code string) string {
	if code == "forbidden_tenant" {
		return "tenant"
	}
	return ""
}

// tamper changes a signed token's tenant without re-signing it.
func tamper(t *testing.T, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	c, err := jwt.NewParser().DecodeSegment(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	c = []byte(strings.Replace(string(c), `"acme"`, `"globex"`, 1))
	parts[1] = (&jwt.Token{}).EncodeSegment(c)
	return strings.Join(parts, ".")
}

func TestAuthLeewayAllowsClockSkew(t *testing.T) {
	h := newHarness(t, withAuth(func(a *api.AuthConfig) { a.JWT.Leeway = 30 * time.Second }))
	now := h.clock.Now()
	tok := sign(t, jwt.SigningMethodHS256, hsSecret, claims(now, "acme", func(c jwt.MapClaims) {
		c["exp"] = now.Add(-10 * time.Second).Unix()
		c["nbf"] = now.Add(10 * time.Second).Unix()
	}))
	if resp, body := h.doWith("GET", "/v1/intents/x", "", bearer(tok)); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("within the leeway: %d %s", resp.StatusCode, body)
	}
	// Time is the injected clock's: past the leeway the token has expired.
	h.clock.Advance(time.Minute)
	resp, body := h.doWith("GET", "/v1/intents/x", "", bearer(tok))
	wantRefusal(t, resp, body, 401, "token_expired")
}

func TestAuthRS256OnlyRefusesHS256SignedWithThePublicKey(t *testing.T) {
	h := newHarness(t, withAuth(func(a *api.AuthConfig) { a.JWT.HS256Secret = nil }))
	now := h.clock.Now()
	forged := sign(t, jwt.SigningMethodHS256, rsaPublicPEM(t), claims(now, "acme", nil))
	resp, body := h.doWith("GET", "/v1/intents/x", "", bearer(forged))
	wantRefusal(t, resp, body, 401, "invalid_token")
	good := sign(t, jwt.SigningMethodRS256, rsaKey(), claims(now, "acme", nil))
	if resp, body := h.doWith("GET", "/v1/intents/x", "", bearer(good)); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("RS256: %d %s", resp.StatusCode, body)
	}
}

func TestAuthCustomTenantClaim(t *testing.T) {
	h := newHarness(t, withAuth(func(a *api.AuthConfig) { a.JWT.TenantClaim = "org" }))
	now := h.clock.Now()
	tok := sign(t, jwt.SigningMethodHS256, hsSecret, claims(now, "", func(c jwt.MapClaims) {
		delete(c, "tenant")
		c["org"] = "acme"
	}))
	h.do("POST", "/v1/intents", "") // no credential: refused, nothing published
	if resp, body := h.doWith("POST", "/v1/intents", `{"intent_type":"echo","payload":{}}`, bearer(tok)); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	reqs := h.pub.Requests()
	if len(reqs) != 1 || reqs[0].Tenant == nil || *reqs[0].Tenant != "acme" {
		t.Fatalf("published %+v", reqs)
	}
}

func TestAuthPublicPaths(t *testing.T) {
	h := newHarness(t, withAuth(nil))
	// Probes, scrapes, the API's description and the console's static
	// files (no data in them: the console's own calls carry a credential).
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/v1/openapi.json", "/", "/console/console.js"} {
		if resp, body := h.do("GET", p, ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s without a credential: %d %.200s", p, resp.StatusCode, body)
		}
	}
	resp, body := h.do("GET", "/no/such/route", "")
	wantRefusal(t, resp, body, 401, "unauthenticated") // routes are not revealed
	resp, body = h.do("POST", "/", "")
	wantRefusal(t, resp, body, 401, "unauthenticated") // only reading the console is public
	resp, body = h.do("GET", "/v1/intent-types", "")
	wantRefusal(t, resp, body, 401, "unauthenticated") // the console's data is not

	locked := newHarness(t, withAuth(func(a *api.AuthConfig) { a.PublicPaths = []string{"/healthz"} }))
	resp, body = locked.do("GET", "/metrics", "")
	wantRefusal(t, resp, body, 401, "unauthenticated")
	if resp, body := locked.doWith("GET", "/metrics", "", bearer(keyAcme)); resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics with a key: %d %s", resp.StatusCode, body)
	}
}

func TestCORSPreflightAndHeaders(t *testing.T) {
	h := newHarness(t, withAuth(nil), withConfig(func(c *api.Config) {
		c.AllowedOrigins = []string{"https://app.example.com"}
	}))
	resp, body := h.doWith("OPTIONS", "/v1/intents", "", http.Header{
		"Origin":                         {"https://app.example.com"},
		"Access-Control-Request-Method":  {"POST"},
		"Access-Control-Request-Headers": {"authorization, content-type"},
	})
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("preflight: %d %s", resp.StatusCode, body)
	}
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "https://app.example.com" {
		t.Fatalf("Allow-Origin %q", got)
	}
	if got := resp.Header.Get("Access-Control-Allow-Headers"); !strings.Contains(got, "Authorization") {
		t.Fatalf("Allow-Headers %q", got)
	}
	resp, body = h.doWith("OPTIONS", "/v1/intents", "", http.Header{
		"Origin":                        {"https://evil.example.com"},
		"Access-Control-Request-Method": {"POST"},
	})
	wantRefusal(t, resp, body, 403, "forbidden_origin")
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatal("CORS headers for a foreign origin")
	}

	hdr := bearer(keyAcme)
	hdr.Set("Origin", "https://app.example.com")
	resp, body = h.doWith("POST", "/v1/intents", `{"intent_type":"echo","payload":{}}`, hdr)
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		!strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Location") {
		t.Fatalf("cross-origin POST: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	// The browser reads a 401 too, with its challenge.
	resp, _ = h.doWith("POST", "/v1/intents", `{}`, http.Header{"Origin": {"https://app.example.com"}})
	if resp.StatusCode != 401 || resp.Header.Get("Access-Control-Allow-Origin") == "" {
		t.Fatalf("cross-origin 401: %d %v", resp.StatusCode, resp.Header)
	}
}

func TestAuthOffIsShownByTheGauge(t *testing.T) {
	h := newHarness(t)
	if got := metricValue(t, h.reg, "switchboard_auth_disabled"); got != 1 {
		t.Fatalf("switchboard_auth_disabled = %v with auth off", got)
	}
	if resp, body := h.do("POST", "/v1/intents", `{"intent_type":"echo","payload":{},"tenant":"anyone"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestAuthConfigValidate(t *testing.T) {
	key := api.Key{Name: "k", Tenant: "acme", SHA256: sha256.Sum256([]byte(keyAcme))}
	for name, a := range map[string]api.AuthConfig{
		"Required needs":       {Required: true},
		"Required is false":    {APIKeys: []api.Key{key}},
		"not unique":           {Required: true, APIKeys: []api.Key{key, key}},
		"Tenant":               {Required: true, APIKeys: []api.Key{{Name: "k", Tenant: "a b", SHA256: key.SHA256}}},
		"SHA256 is not set":    {Required: true, APIKeys: []api.Key{{Name: "k", Tenant: "a"}}},
		"HS256Secret":          {Required: true, JWT: api.JWTConfig{HS256Secret: []byte("short")}},
		"RS256PublicKeys[0]":   {Required: true, JWT: api.JWTConfig{RS256PublicKeys: []*rsa.PublicKey{nil}}},
		"Leeway":               {Required: true, APIKeys: []api.Key{key}, JWT: api.JWTConfig{Leeway: -1}},
		"PublicPaths":          {Required: true, APIKeys: []api.Key{key}, PublicPaths: []string{"healthz"}},
		"serves tenants' data": {Required: true, APIKeys: []api.Key{key}, PublicPaths: []string{"/v1/intents"}},
	} {
		err := (api.Config{Auth: a}).Validate()
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: Validate = %v", name, err)
		}
	}
}

// lockedBuffer is a log sink safe for the server's goroutines and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

func TestRunWarnsWhileAuthIsOff(t *testing.T) {
	for _, tc := range []struct {
		name string
		auth api.AuthConfig
		want int // warnings after start and one period
	}{
		{"off", api.AuthConfig{AuthOffWarnings: time.Minute}, 2},
		{"on", testAuth(), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs lockedBuffer
			clock := clockwork.NewFakeClock()
			srv, err := api.New(api.Config{Listen: "127.0.0.1:0", Auth: tc.auth}, &apitest.Publisher{}, api.NewResults(0),
				api.WithClock(clock), api.WithRegisterer(prometheus.NewRegistry()),
				api.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			errc := startRun(ctx, t, srv)
			if tc.want > 0 {
				wctx, wcancel := context.WithTimeout(context.Background(), testTimeout)
				defer wcancel()
				if err := clock.BlockUntilContext(wctx, 1); err != nil { // the warning's ticker
					t.Fatal(err)
				}
				clock.Advance(time.Minute)
				eventually(t, "the repeated warning", func() bool { return logs.count("AUTHENTICATION IS OFF") == tc.want })
			}
			cancel()
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if got := logs.count("level=WARN msg=\"AUTHENTICATION IS OFF"); got != tc.want {
				t.Fatalf("%d warnings, want %d:\n%s", got, tc.want, logs.b.String())
			}
		})
	}
}

// TestOriginDefaultsToSameOrigin: with no AllowedOrigins, a browser on
// another origin is refused (it was allowed before authentication came),
// on HTTP and on the upgrade, with authentication off too.
func TestOriginDefaultsToSameOrigin(t *testing.T) {
	h := newHarness(t)
	evil := http.Header{"Origin": {"https://evil.example.com"}}
	resp, body := h.doWith("POST", "/v1/intents", `{"intent_type":"echo","payload":{}}`, evil)
	wantRefusal(t, resp, body, http.StatusForbidden, "forbidden_origin")
	conn, resp, body := h.tryDial("", evil)
	if conn != nil {
		t.Fatal("a foreign origin opened a stream")
	}
	wantRefusal(t, resp, body, http.StatusForbidden, "forbidden_origin")
	if len(h.pub.Requests()) != 0 {
		t.Fatal("a refused request was published")
	}
	if c, resp, body := h.tryDial("", http.Header{"Origin": {h.ts.URL}}); c == nil {
		t.Fatalf("same origin refused: %d %s", resp.StatusCode, body)
	}
	if resp, body := h.do("POST", "/v1/intents", `{"intent_type":"echo","payload":{}}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("no Origin (not a browser): %d %s", resp.StatusCode, body)
	}
}

// TestAPIKeyWithTwoDotsIsAccepted: an API key shaped like a JWT (two dots)
// sent as a Bearer token is still an API key when it matches one; a
// dotted credential that matches nothing keeps the JWT's error.
func TestAPIKeyWithTwoDotsIsAccepted(t *testing.T) {
	const dotted = "sk.acme.0123456789abcdef"
	h := newHarness(t, withAuth(func(a *api.AuthConfig) {
		a.APIKeys = append(a.APIKeys, api.Key{Name: "acme-dotted", Tenant: "acme", SHA256: sha256.Sum256([]byte(dotted))})
	}))
	if resp, body := h.doWith("GET", "/v1/intents/nope", "", bearer(dotted)); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("dotted API key: %d %s, want 404 (authenticated, unknown intent)", resp.StatusCode, body)
	}
	resp, body := h.doWith("GET", "/v1/intents/nope", "", bearer("sk.other.0123456789abcdef"))
	wantError(t, resp, body, http.StatusUnauthorized, "invalid_token", "")
}
