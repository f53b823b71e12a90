package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/router/config"
)

func TestPendingByteBudgets(t *testing.T) {
	c, err := parse(t, "agents: {a: {}}\nintents: {e: {agent: a}}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Router.MaxPendingBytes != config.DefaultMaxPendingBytes || c.Router.MaxPendingBytesPerTenant != config.DefaultMaxPendingBytesPerTenant {
		t.Fatalf("defaults: %d, %d", c.Router.MaxPendingBytes, c.Router.MaxPendingBytesPerTenant)
	}
	// A total below the per-tenant default lowers it.
	c, err = parse(t, "agents: {a: {}}\nintents: {e: {agent: a}}\nrouter: {max_pending_bytes: 10000000}\n", nil)
	if err != nil || c.Router.MaxPendingBytesPerTenant != 10000000 {
		t.Fatalf("per tenant %d, %v", c.Router.MaxPendingBytesPerTenant, err)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"router: {max_pending_bytes: 1000}\n", "sb.yaml:3: router.max_pending_bytes: 1000 bytes is less than 2097152"},
		{"router:\n  max_pending_bytes: 8000000\n  max_pending_bytes_per_tenant: 9000000\n", "sb.yaml:5: router.max_pending_bytes_per_tenant: 9000000 bytes is more than router.max_pending_bytes"},
		{"router: {max_pending_bytes_per_tenant: -1}\n", "router.max_pending_bytes_per_tenant: -1 bytes is less than"},
		{"router:\n  memory_limit_bytes: -5\n", "sb.yaml:4: router.memory_limit_bytes: -5 bytes: must not be negative"},
	} {
		_, err := parse(t, "agents: {a: {}}\nintents: {e: {agent: a}}\n"+tc.yaml, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, config.ErrInvalid) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
