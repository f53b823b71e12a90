package api_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/contexts"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// heldContexts is an api.ContextStore over a map keyed by
// contexts.SnapshotKey.
type heldContexts struct {
	entries map[string]contexts.Entry
	ready   error
}

func (c *heldContexts) Get(tenant, entity string) (contexts.Entry, bool) {
	e, ok := c.entries[contexts.SnapshotKey(tenant, entity)]
	return e, ok
}

func (c *heldContexts) Ready() error { return c.ready }

func TestGetContext(t *testing.T) {
	store := &heldContexts{entries: map[string]contexts.Entry{
		"user/1": {
			Snapshot: &schemas.ContextSnapshot{EntityID: "user/1", Version: 4, SnapshotTs: 1000, Features: map[string]float64{"clicks_5m": 3}},
			Age:      1500 * time.Millisecond, Status: schemas.ContextFresh,
		},
	}}
	h := newHarness(t, withOption(api.WithContexts(store)))

	resp, body := h.do(http.MethodGet, "/v1/contexts/user%2F1", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got["entity_id"] != "user/1" || got["version"] != 4.0 || got["snapshot_ts"] != 1000.0 || got["age_ms"] != 1500.0 || got["status"] != "fresh" {
		t.Fatalf("body %s", body)
	}
	if f, _ := got["features"].(map[string]any); f["clicks_5m"] != 3.0 {
		t.Fatalf("features in %s", body)
	}

	resp, body = h.do(http.MethodGet, "/v1/contexts/user-2", "")
	wantError(t, resp, body, http.StatusNotFound, "not_found", "")

	store.ready = errors.New("catching up")
	resp, body = h.do(http.MethodGet, "/v1/contexts/user-2", "")
	wantError(t, resp, body, http.StatusServiceUnavailable, "unavailable", "")
}

func TestGetContextWithoutAStore(t *testing.T) {
	h := newHarness(t)
	resp, body := h.do(http.MethodGet, "/v1/contexts/user-1", "")
	wantError(t, resp, body, http.StatusNotFound, "not_found", "")
}

// A caller reads its tenant's entities only: another tenant's entity of the
// same id, and an entity without a tenant, answer word for word as an
// unknown entity does.
func TestGetContextIsScopedToTheCallersTenant(t *testing.T) {
	entry := func(tenant string, n float64) contexts.Entry {
		return contexts.Entry{Snapshot: &schemas.ContextSnapshot{EntityID: "user-1", Tenant: &tenant, Version: 1, Features: map[string]float64{"n": n}}, Status: schemas.ContextFresh}
	}
	store := &heldContexts{entries: map[string]contexts.Entry{
		contexts.SnapshotKey("acme", "user-1"): entry("acme", 1),
		"user-2":                               {Snapshot: &schemas.ContextSnapshot{EntityID: "user-2", Features: map[string]float64{}}},
	}}
	h := newHarness(t, withAuth(nil), withOption(api.WithContexts(store)))
	resp, body := h.doWith(http.MethodGet, "/v1/contexts/user-1", "", bearer(keyAcme))
	if resp.StatusCode != http.StatusOK || decode[map[string]any](t, body)["features"].(map[string]any)["n"] != 1.0 {
		t.Fatalf("acme's own entity: %d %s", resp.StatusCode, body)
	}
	_, unknown := h.doWith(http.MethodGet, "/v1/contexts/nobody-1", "", bearer(keyGlobex))
	for _, tc := range []struct{ key, entity string }{{keyGlobex, "user-1"}, {keyAcme, "user-2"}, {keyGlobex, "user-2"}} {
		resp, body := h.doWith(http.MethodGet, "/v1/contexts/"+tc.entity, "", bearer(tc.key))
		wantError(t, resp, body, http.StatusNotFound, "not_found", "")
		if strings.ReplaceAll(string(body), tc.entity, "nobody-1") != string(unknown) {
			t.Fatalf("another namespace's entity answers\n%s\nan unknown one\n%s", body, unknown)
		}
	}
}
