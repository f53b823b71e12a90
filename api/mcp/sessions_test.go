package mcp_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/mcp"
)

// metric reads a gauge or counter series of reg (labels as name="value"
// pairs), -1 when absent.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					found = found || (lp.GetName() == labels[i] && lp.GetValue() == labels[i+1])
				}
				if !found {
					continue next
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

// TestSessionLimitRefusesAnInitialize: with http.mcp.max_sessions 3 and 2
// per tenant, a tenant's third initialize is answered 503 with a JSON-RPC
// error naming its own bound and opening no session, another tenant's
// past the instance's bound names nothing of the first; requests on open
// sessions and stateless ones are not bounded; a DELETE gives the slot
// back, and another tenant's DELETE of the session (403) does not.
func TestSessionLimitRefusesAnInitialize(t *testing.T) {
	reg := prometheus.NewRegistry()
	limit, err := api.NewSessionLimit(api.SessionLimitConfig{Max: 3, MaxPerTenant: 2}, reg)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, nil, func(c *mcp.Config) { c.SessionLimit = limit })
	const initialize = `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	refused := func(key, want string) {
		t.Helper()
		r := h.post(key, nil, initialize)
		e, _ := r.reply()["error"].(map[string]any)
		data, _ := e["data"].(map[string]any)
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "1" || r.header.Get("Mcp-Session-Id") != "" ||
			e["code"] != float64(-32000) || data["reason"] != "mcp_sessions" || r.reply()["id"] != float64(7) ||
			!strings.Contains(e["message"].(string), want) {
			t.Fatalf("want a refusal saying %q: %d %v %s", want, r.status, r.header, r.body)
		}
	}
	a1 := h.session(keyAcme)
	h.session(keyAcme)
	refused(keyAcme, `overloaded (mcp_sessions): tenant "acme" already has 2 MCP sessions open here, its http.mcp.max_sessions_per_tenant`)
	if g := metric(t, reg, "switchboard_api_mcp_sessions"); g != 2 {
		t.Fatalf("sessions gauge %v, want 2", g)
	}
	if r := h.post(keyAcme, sessionHdr(a1), `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`); r.reply()["result"] == nil {
		t.Fatalf("a request on an open session: %s", r.body)
	}
	if r := h.post(keyAcme, hdr2026("tools/list", ""), `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+meta2026("")+`}}`); r.reply()["result"] == nil {
		t.Fatalf("a stateless request: %s", r.body)
	}

	h.session(keyOther)
	refused(keyOther, "overloaded (mcp_sessions): this instance already holds 3 MCP sessions open here, its http.mcp.max_sessions;")
	if n := metric(t, reg, "switchboard_api_admission_refused_total", "reason", "mcp_sessions"); n != 2 {
		t.Fatalf("refused{mcp_sessions} = %v, want 2", n)
	}

	del := func(key, sid string) int {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, h.ts.URL+"/mcp", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if code := del(keyOther, a1); code != http.StatusForbidden {
		t.Fatalf("another tenant's DELETE: %d", code)
	}
	if g := metric(t, reg, "switchboard_api_mcp_sessions"); g != 3 {
		t.Fatalf("sessions gauge %v after another tenant's DELETE, want 3", g)
	}
	if code := del(keyAcme, a1); code/100 != 2 {
		t.Fatalf("DELETE: %d", code)
	}
	if g := metric(t, reg, "switchboard_api_mcp_sessions"); g != 2 {
		t.Fatalf("sessions gauge %v after DELETE, want 2", g)
	}
	h.session(keyAcme)
}

// TestSessionLimitFreesSessionsGoneByThemselves: a session the SDK closes
// itself (here: its initialize failed) gives its slot back as it closes,
// and the prune at an initialize never takes a live session for gone.
func TestSessionLimitFreesSessionsGoneByThemselves(t *testing.T) {
	reg := prometheus.NewRegistry()
	limit, err := api.NewSessionLimit(api.SessionLimitConfig{Max: 1}, reg)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, nil, func(c *mcp.Config) { c.SessionLimit = limit })
	bad := h.post(keyAcme, nil, `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":5}}`)
	if bad.header.Get("Mcp-Session-Id") == "" || bad.reply()["error"] == nil {
		t.Fatalf("a failed initialize: %d %v %s", bad.status, bad.header, bad.body)
	}
	waitFor(t, func() bool { return metric(t, reg, "switchboard_api_mcp_sessions") == 0 })
	h.session(keyOther)
	const initialize = `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	if r := h.post(keyAcme, nil, initialize); r.status != http.StatusServiceUnavailable {
		t.Fatalf("over the bound: %d %s", r.status, r.body)
	}
	// A field the SDK ignores, of a type the endpoint's peek cannot read,
	// is still an initialize.
	odd := `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"name":5,"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	if r := h.post(keyAcme, nil, odd); r.status != http.StatusServiceUnavailable {
		t.Fatalf("over the bound, an odd initialize: %d %s", r.status, r.body)
	}
	h.clock.Advance(time.Second)
	if r := h.post(keyAcme, nil, initialize); r.status != http.StatusServiceUnavailable {
		t.Fatalf("over the bound, a live session: %d %s", r.status, r.body)
	}
}

// TestSessionLimitFreesAnIdleSessionAtOnce: a session the SDK closes for
// idling past SessionTimeout (its own timer) gives its slot back when the
// SDK closes it, with no initialize to prune: the gauge falls to 0 and a
// full instance takes a new session.
func TestSessionLimitFreesAnIdleSessionAtOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	limit, err := api.NewSessionLimit(api.SessionLimitConfig{Max: 1}, reg)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, nil, func(c *mcp.Config) {
		c.SessionLimit = limit
		c.SessionTimeout = 20 * time.Millisecond // the SDK's timer: real time
	})
	sid := h.session(keyAcme)
	waitFor(t, func() bool { return metric(t, reg, "switchboard_api_mcp_sessions") == 0 })
	if r := h.post(keyAcme, sessionHdr(sid), `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`); r.status != http.StatusNotFound {
		t.Fatalf("the idle session is still served: %d %s", r.status, r.body)
	}
	h.session(keyOther)
}
