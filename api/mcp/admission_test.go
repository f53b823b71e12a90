package mcp_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/apitest"
	"github.com/switchboard-mcp/switchboard/api/mcp"
)

// TestAdmissionRefusesACall: while the backlog would outlast the intent's
// timeout, tools/call answers a tool error (isError) saying so and when to
// retry, and publishes nothing; a retry of a call already answered still
// gets its result; once the backlog drains, calls are published again.
func TestAdmissionRefusesACall(t *testing.T) {
	backlog, clock := &apitest.Backlog{}, clockwork.NewFakeClock()
	reg := prometheus.NewRegistry()
	adm, err := api.NewAdmission(api.AdmissionConfig{BacklogFraction: 0.8, Interval: 5 * time.Second}, backlog, clock, reg)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, nil, func(c *mcp.Config) { c.Admission = adm })
	sid := h.session(keyAcme)
	answered := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"n":1}}}`
	if r := h.post(keyAcme, sessionHdr(sid), answered); r.reply() == nil || r.reply()["result"].(map[string]any)["isError"] == true {
		t.Fatalf("before the backlog: %s", r.body)
	}

	backlog.SetAgent("echo", 1700*time.Millisecond, clock.Now())
	r := h.post(keyAcme, sessionHdr(sid), `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"n":2}}}`)
	res, _ := r.reply()["result"].(map[string]any)
	if res == nil || res["isError"] != true {
		t.Fatalf("refused call: %s", r.body)
	}
	text := res["content"].([]any)[0].(map[string]any)["text"].(string)
	meta := res["_meta"].(map[string]any)
	if !strings.Contains(text, "overloaded (agent_backlog)") || !strings.Contains(text, "retry in 5s") ||
		meta["reason"] != "agent_backlog" || meta["retry_after_ms"] != float64(5000) || meta["backlog_ms"] != float64(1700) {
		t.Errorf("refusal: %q %v", text, meta)
	}
	if n := len(h.pub.Requests()); n != 1 {
		t.Fatalf("published %d intents, want 1 (the refused call's was not)", n)
	}

	// The answered call, retried: its result, not a refusal.
	if r := h.post(keyAcme, sessionHdr(sid), answered); r.reply() == nil || r.reply()["result"].(map[string]any)["isError"] == true {
		t.Fatalf("retry of an answered call: %s", r.body)
	}
	// Another tenant's identical call is another intent: refused.
	other := h.post(keyOther, sessionHdr(h.session(keyOther)), answered)
	if res, _ := other.reply()["result"].(map[string]any); res == nil || res["isError"] != true {
		t.Fatalf("another tenant's call: %s", other.body)
	}

	// Drained: published again.
	backlog.SetAgent("echo", 0, clock.Now())
	if r := h.post(keyAcme, sessionHdr(sid), `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"n":2}}}`); r.reply() == nil || r.reply()["result"].(map[string]any)["isError"] == true {
		t.Fatalf("after draining: %s", r.body)
	}
	if n := len(h.pub.Requests()); n != 2 {
		t.Fatalf("published %d intents, want 2", n)
	}
	mfs, _ := reg.Gather()
	var refused float64
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			refused += m.GetCounter().GetValue()
		}
	}
	if refused != 2 {
		t.Errorf("switchboard_api_admission_refused_total = %v, want 2", refused)
	}
}
