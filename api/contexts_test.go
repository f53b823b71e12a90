package api_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/contexts"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// heldContexts is an api.ContextStore over a map.
type heldContexts struct {
	entries map[string]contexts.Entry
	ready   error
}

func (c *heldContexts) Get(entity string) (contexts.Entry, bool) {
	e, ok := c.entries[entity]
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
