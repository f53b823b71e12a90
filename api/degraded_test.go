package api_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchboard-mcp/switchboard/api"
)

// A degradation (a hanging transaction, say) is listed by /readyz, which
// stays 200: every instance sees the same one, and taking them all out of
// service would not help.
func TestReadyzListsDegradationAndStaysReady(t *testing.T) {
	var problems atomic.Pointer[[]string]
	problems.Store(&[]string{})
	h := newHarness(t, withOption(api.WithDegradation(func() []string { return *problems.Load() })))

	resp, body := h.do("GET", "/readyz", "")
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != `{"status":"ready"}` {
		t.Fatalf("readyz without a degradation: %d %s", resp.StatusCode, body)
	}
	problems.Store(&[]string{"hanging transaction on sb.result[3]"})
	resp, body = h.do("GET", "/readyz", "")
	if want := `{"status":"ready","degraded":["hanging transaction on sb.result[3]"]}`; resp.StatusCode != 200 || strings.TrimSpace(string(body)) != want {
		t.Fatalf("readyz with a degradation: %d %s, want 200 %s", resp.StatusCode, body, want)
	}
}
