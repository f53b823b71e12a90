package main

import (
	"bytes"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/router/config"
)

// The derived limit is the Go-side byte budgets plus the baseline, follows
// them when they change; router.memory_limit_bytes is the whole process's
// budget, and Go gets it less what librdkafka and pebble hold outside Go
// (the prefetch bounds of the router's consumer and of the results reader,
// a 32nd of the budget each, the lookup cache and librdkafka's working
// set).
func TestMemoryLimitIsDerivedFromTheBudgets(t *testing.T) {
	const base = "agents: {a: {}}\nintents: {e: {agent: a}}\n"
	for _, tc := range []struct {
		yaml string
		want int64
		from string
	}{
		{base, (256 + 128 + 4*8 + 256 + 64 + 64) << 20, "derived"},
		{base + "router: {max_pending_bytes: 67108864}\nhttp: {results_max_bytes: 16777216, websocket: {send_queue_bytes: 1048576}}\n", (64 + 16 + 4*1 + 256 + 64 + 64) << 20, "derived"},
		{base + "http: {max_waiting_bytes: 16777216, max_reading_bytes: 8388608}\n", (256 + 128 + 4*8 + 16 + 8 + 64) << 20, "derived"},
		{base + "router: {memory_limit_bytes: 314572800}\n", 314572800 - 2*314572800/32 - 9<<20 - 64<<20, "router.memory_limit_bytes"},
		{base + "router: {memory_limit_bytes: 314572800}\nhttp: {lookup: {cache_mb: 8}}\n", 314572800 - 2*314572800/32 - 8<<20 - 64<<20, "router.memory_limit_bytes"},
		{base + "router: {memory_limit_bytes: 1073741824}\n", (1024 - 16 - 16 - 16 - 64) << 20, "router.memory_limit_bytes"},
	} {
		cfg, err := config.Parse("sb.yaml", []byte(tc.yaml), nil)
		if err != nil {
			t.Fatal(err)
		}
		apiCfg, err := apiConfig(cfg, false)
		if err != nil {
			t.Fatal(err)
		}
		b := deriveMemoryLimit(cfg, apiCfg)
		if b.limit != tc.want || b.from != tc.from {
			t.Errorf("%q: limit %d MiB from %s, want %d MiB from %s", tc.yaml, b.limit>>20, b.from, tc.want>>20, tc.from)
		}
		// With a process budget, everything fits inside it.
		if b.process > 0 && (b.limit+b.outsideGo != b.process || b.pending+b.results+b.stream+b.waiting+b.reading+memoryBaseline > b.limit) {
			t.Errorf("%q: budgets do not fit: %+v", tc.yaml, b)
		}
	}
	if api.DefaultResultsMaxBytes != config.DefaultResultsMaxBytes || api.DefaultSendQueueBytes != config.DefaultSendQueueBytes ||
		api.DefaultMaxWaiting != config.DefaultMaxWaiting || api.DefaultMaxWaitingBytes != config.DefaultMaxWaitingBytes ||
		api.DefaultMaxReadingBytes != config.DefaultMaxReadingBytes {
		t.Fatal("the API's defaults and the configuration's copies of them differ")
	}
}

// serve sets the limit when GOMEMLIMIT is unset and leaves the runtime's
// alone when it is set; either way it logs the limit in force.
func TestMemoryLimitIsAppliedUnlessGOMEMLIMITIsSet(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		applyMemoryLimit(memoryBudget{limit: 300 << 20, from: "derived"}, log)
		if got := debug.SetMemoryLimit(-1); got != 300<<20 {
			t.Fatalf("limit %d, want 300 MiB", got)
		}
		if !strings.Contains(out.String(), "limit_mib=300") {
			t.Fatalf("not logged: %s", out.String())
		}
	}
	debug.SetMemoryLimit(before)
	out.Reset()
	t.Setenv("GOMEMLIMIT", "1GiB")
	applyMemoryLimit(memoryBudget{limit: 300 << 20, from: "derived"}, log)
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Fatalf("GOMEMLIMIT set, but the limit changed to %d", got)
	}
	if !strings.Contains(out.String(), "GOMEMLIMIT=1GiB") {
		t.Fatalf("not logged: %s", out.String())
	}
}

// The process's memory budget, which the router holds its resident set to,
// is router.memory_limit_bytes when set, and otherwise Go's limit in force
// plus what is held outside Go; serve logs it.
func TestProcessBudgetIsTheLimitOrGoPlusOutside(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		if got := applyMemoryLimit(memoryBudget{limit: 480 << 20, from: "derived", outsideGo: 96 << 20}, log); got != 0 {
			t.Errorf("derived: resident-set budget %d MiB, want 0 (logged, not enforced)", got>>20)
		}
		if !strings.Contains(out.String(), "process_budget_mib=576") {
			t.Errorf("process budget not logged: %s", out.String())
		}
		if got := applyMemoryLimit(memoryBudget{limit: 202 << 20, from: "router.memory_limit_bytes", outsideGo: 96 << 20, process: 298 << 20}, log); got != 298<<20 {
			t.Errorf("router.memory_limit_bytes: process budget %d MiB, want 298", got>>20)
		}
	}
	t.Setenv("GOMEMLIMIT", "200MiB")
	debug.SetMemoryLimit(200 << 20)
	if got := applyMemoryLimit(memoryBudget{limit: 480 << 20, from: "derived", outsideGo: 96 << 20}, log); got != 0 {
		t.Errorf("GOMEMLIMIT=200MiB: resident-set budget %d MiB, want 0 (logged, not enforced)", got>>20)
	}
	if !strings.Contains(out.String(), "process_budget_mib=296") {
		t.Errorf("GOMEMLIMIT=200MiB: process budget not logged as 296 MiB: %s", out.String())
	}
	if got := applyMemoryLimit(memoryBudget{limit: 202 << 20, from: "router.memory_limit_bytes", outsideGo: 96 << 20, process: 298 << 20}, log); got != 298<<20 {
		t.Errorf("GOMEMLIMIT and router.memory_limit_bytes: resident-set budget %d MiB, want 298", got>>20)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	if got := applyMemoryLimit(memoryBudget{limit: 480 << 20, from: "derived", outsideGo: 96 << 20}, log); got != 0 {
		t.Errorf("GOMEMLIMIT=off: process budget %d MiB, want 0 (none)", got>>20)
	}
}
