package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/api"
)

// TestWaitLimitBoundsBytes: the payloads of the callers waiting are
// bounded in bytes, per tenant and per instance: a caller whose payload
// would pass a byte bound is refused at once, naming its tenant's bound or
// the instance's (nothing of another tenant), and its intent is not
// published; a caller of any size is let in when none of its scope waits.
func TestWaitLimitBoundsBytes(t *testing.T) {
	reg := prometheus.NewRegistry()
	l, err := api.NewWaitLimit(api.WaitLimitConfig{Max: 10, MaxPerTenant: 10, MaxBytes: 3000, MaxBytesPerTenant: 2000}, reg)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, withAuth(nil), withOption(api.WithWaitLimit(l)))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	// body is an intent whose payload is n bytes long.
	body := func(id string, n int) string {
		return fmt.Sprintf(`{"intent_id":%q,"intent_type":"echo","payload":{"s":"%s"}}`, id, strings.Repeat("x", n-8))
	}
	bytesHeld := func(want float64) {
		t.Helper()
		eventually(t, fmt.Sprintf("%v bytes waiting", want), func() bool { return metricValue(t, reg, "switchboard_api_waiting_bytes") == want })
	}
	a1 := h.startCall(ctx, "/v1/intents?wait=10s", body("a-1", 1500), bearer(keyAcme))
	bytesHeld(1500)
	resp, b := h.doWith("POST", "/v1/intents?wait=10s", body("a-2", 600), bearer(keyAcme))
	wantWaitingRefusal(t, resp, b, `tenant "acme"'s callers waiting here hold 1500 bytes of requests, and this one's 600 would pass its http.max_waiting_bytes_per_tenant, 2000`)
	a3 := h.startCall(ctx, "/v1/intents?wait=10s", body("a-3", 400), bearer(keyAcme))
	bytesHeld(1900)
	g1 := h.startCall(ctx, "/v1/intents?wait=10s", body("g-1", 1000), bearer(keyGlobex))
	bytesHeld(2900)
	resp, b = h.doWith("POST", "/v1/intents?wait=10s", body("g-2", 200), bearer(keyGlobex))
	wantWaitingRefusal(t, resp, b, `the callers waiting here hold 2900 bytes of requests, and this one's 200 would pass its http.max_waiting_bytes, 3000`)
	if strings.Contains(string(b), "acme") {
		t.Fatalf("globex's refusal names acme: %s", b)
	}
	if resp, b := h.doWith("POST", "/v1/intents", body("g-3", 2000), bearer(keyGlobex)); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("a POST that does not wait is not bounded: %d %s", resp.StatusCode, b)
	}
	for _, id := range []string{"a-2", "g-2"} {
		for _, req := range h.pub.Requests() {
			if req.IntentID == id {
				t.Fatalf("refused intent %s was published", id)
			}
		}
	}

	for _, id := range []string{"a-1", "a-3", "g-1"} {
		h.results.Add(tenantResult(id, map[byte]string{'a': "acme", 'g': "globex"}[id[0]], ""))
	}
	for _, c := range []<-chan waitAnswer{a1, a3, g1} {
		if a := receive(t, "a waiting caller", c); a.err != nil || a.status != http.StatusOK {
			t.Fatalf("caller: %d %v %s", a.status, a.err, a.body)
		}
	}
	bytesHeld(0)
	// Nobody waits: one caller larger than both bounds is let in.
	big := h.startCall(ctx, "/v1/intents?wait=10s", body("a-4", 4000), bearer(keyAcme))
	bytesHeld(4000)
	h.results.Add(tenantResult("a-4", "acme", ""))
	if a := receive(t, "the large caller", big); a.err != nil || a.status != http.StatusOK {
		t.Fatalf("the large caller: %d %v %s", a.status, a.err, a.body)
	}
	bytesHeld(0)
}
