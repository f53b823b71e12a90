package api_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/intents/payload"
)

const keyOps = "sk_ops_0123456789abcdef0123"

// withReloadCounting enables the reload endpoint with a stub that answers
// rep and counts its calls.
func withReloadCounting(calls *atomic.Int32, rep api.ReloadReport) harnessOpt {
	return withOption(api.WithReload(func(context.Context) api.ReloadReport {
		calls.Add(1)
		return rep
	}))
}

// Only an admin may reload: an API key marked admin, or a JWT whose admin
// claim is true. Other credentials are refused 403 without a reload.
func TestReloadNeedsAnAdmin(t *testing.T) {
	var calls atomic.Int32
	h := newHarness(t, withReloadCounting(&calls, api.ReloadReport{Result: api.ReloadApplied, Hash: "abc"}), withAuth(func(a *api.AuthConfig) {
		a.APIKeys = append(a.APIKeys, api.Key{Name: "ops", Tenant: "ops", SHA256: sha256.Sum256([]byte(keyOps)), Admin: true})
		a.JWT.AdminClaim = "switchboard_admin"
	}))
	now := h.clock.Now()
	admin := sign(t, jwt.SigningMethodHS256, hsSecret, claims(now, "acme", func(c jwt.MapClaims) { c["switchboard_admin"] = true }))
	notAdmin := sign(t, jwt.SigningMethodHS256, hsSecret, claims(now, "acme", func(c jwt.MapClaims) { c["switchboard_admin"] = "true" }))
	cases := []struct {
		name   string
		hdr    http.Header
		status int
	}{
		{"tenant key", http.Header{"X-API-Key": {keyAcme}}, http.StatusForbidden},
		{"JWT without the claim", bearer(sign(t, jwt.SigningMethodHS256, hsSecret, claims(now, "acme", nil))), http.StatusForbidden},
		{"JWT with a string claim", bearer(notAdmin), http.StatusForbidden},
		{"no credential", http.Header{}, http.StatusUnauthorized},
		{"admin key", http.Header{"X-API-Key": {keyOps}}, http.StatusOK},
		{"admin JWT", bearer(admin), http.StatusOK},
	}
	want := int32(0)
	for _, c := range cases {
		resp, body := h.doWith(http.MethodPost, "/v1/admin/reload", "", c.hdr)
		if resp.StatusCode != c.status {
			t.Fatalf("%s: status %d, want %d: %s", c.name, resp.StatusCode, c.status, body)
		}
		if c.status == http.StatusForbidden {
			wantError(t, resp, body, http.StatusForbidden, "forbidden_admin", "")
		}
		if c.status == http.StatusOK {
			want++
			if r := decode[api.ReloadReport](t, body); r.Result != api.ReloadApplied || r.Hash != "abc" {
				t.Fatalf("%s: report %s", c.name, body)
			}
		}
		if got := calls.Load(); got != want {
			t.Fatalf("%s: %d reloads, want %d", c.name, got, want)
		}
	}
}

// With authentication off the endpoint serves loopback clients only.
func TestReloadWithoutAuthIsLoopbackOnly(t *testing.T) {
	var calls atomic.Int32
	h := newHarness(t, withReloadCounting(&calls, api.ReloadReport{Result: api.ReloadApplied}))
	resp, body := h.do(http.MethodPost, "/v1/admin/reload", "")
	if resp.StatusCode != http.StatusOK || calls.Load() != 1 {
		t.Fatalf("loopback: status %d, %d reloads: %s", resp.StatusCode, calls.Load(), body)
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/admin/reload", nil)
	req.RemoteAddr = "192.0.2.7:40000"
	rec := httptest.NewRecorder()
	h.srv.Handler().ServeHTTP(rec, req)
	wantError(t, rec.Result(), rec.Body.Bytes(), http.StatusForbidden, "forbidden_admin", "")
	if calls.Load() != 1 {
		t.Fatal("a remote client reloaded with authentication off")
	}
}

// A refused or invalid reload answers 409 or 422 with the API's error shape
// naming the key.
func TestReloadFailureAnswers(t *testing.T) {
	for _, c := range []struct {
		rep    api.ReloadReport
		status int
		code   string
	}{
		{api.ReloadFailed(api.ReloadRefused, "old", []string{"router.delivery"}, "router.delivery needs a restart", "router.delivery"), http.StatusConflict, "restart_required"},
		{api.ReloadFailed(api.ReloadInvalid, "old", nil, "sb.yaml:7: intents.a.timeot: unknown key", "intents.a.timeot"), http.StatusUnprocessableEntity, "config_invalid"},
	} {
		var calls atomic.Int32
		h := newHarness(t, withReloadCounting(&calls, c.rep))
		resp, body := h.do(http.MethodPost, "/v1/admin/reload", "")
		wantError(t, resp, body, c.status, c.code, c.rep.Error.Field)
		if r := decode[api.ReloadReport](t, body); r.Result != c.rep.Result || r.Hash != "old" || !strings.Contains(r.Error.Message, c.rep.Error.Field) {
			t.Fatalf("report %s", body)
		}
	}
}

// SetCatalog changes what the API lists and the input schemas it enforces.
func TestSetCatalogFollowsReload(t *testing.T) {
	h := newHarness(t, withOption(api.WithCatalog(api.Catalog{IntentTypes: []api.IntentTypeInfo{{Name: "echo", Agent: "echo", TimeoutMs: 1000}}})))
	const intent = `{"intent_type":"echo","payload":{"q":1}}`
	if resp, body := h.do(http.MethodPost, "/v1/intents", intent); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("before: %d %s", resp.StatusCode, body)
	}
	schema, err := payload.Compile([]byte(`{"type":"object","required":["text"]}`))
	if err != nil {
		t.Fatal(err)
	}
	h.srv.SetCatalog(api.Catalog{IntentTypes: []api.IntentTypeInfo{{Name: "echo", Agent: "echo", TimeoutMs: 5000, InputSchema: schema}}})
	resp, body := h.do(http.MethodPost, "/v1/intents", intent)
	wantError(t, resp, body, http.StatusUnprocessableEntity, "invalid_payload", "payload")
	_, body = h.do(http.MethodGet, "/v1/intent-types", "")
	if !strings.Contains(string(body), `"timeout_ms":5000`) {
		t.Fatalf("intent types after SetCatalog: %s", body)
	}
	_, body = h.do(http.MethodGet, "/v1/openapi.json", "")
	if !strings.Contains(string(body), "IntentPayload.echo") {
		t.Fatal("openapi.json lacks the input schema set by SetCatalog")
	}
}
