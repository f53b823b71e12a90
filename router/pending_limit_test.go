package router_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-mcp/switchboard/router/config"
)

// TestPendingLimitIsExported: router.max_pending is a gauge beside
// switchboard_intents_pending, for the alert on pending near the bound.
func TestPendingLimitIsExported(t *testing.T) {
	h := start(t, strings.Replace(testConfig, "max_pending: 3", "max_pending: 500", 1), config.AtLeastOnce)
	want := "# HELP switchboard_intents_pending_limit router.max_pending: at this many pending intents the router pauses fetching requests (and resumes below 90% of it).\n" +
		"# TYPE switchboard_intents_pending_limit gauge\nswitchboard_intents_pending_limit 500\n"
	if err := testutil.GatherAndCompare(h.reg, strings.NewReader(want), "switchboard_intents_pending_limit"); err != nil {
		t.Fatal(err)
	}
}
