package config_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/router/config"
)

const memBase = "agents: {a: {}}\nintents: {e: {agent: a}}\n"

// fits reports whether m's Go-side budgets fit Go's share of the process.
func fits(m config.Memory) bool {
	return config.MemoryBaseline+m.Results+m.StreamQueues+m.Waiting+m.Reading+m.Pending <= m.GoLimit && m.GoLimit+m.OutsideGo <= m.Process
}

// Without router.memory_limit_bytes every budget keeps its default, and
// Go's limit is their sum, what callers' requests may hold (waiting and
// being read) included: 896 MiB for the process with the defaults.
func TestMemoryWithoutAProcessBudgetKeepsTheDefaults(t *testing.T) {
	c, err := parse(t, memBase, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := c.Memory()
	want := config.Memory{
		GoLimit: 800 << 20, Pending: 256 << 20, Results: 128 << 20, StreamQueues: 32 << 20, Waiting: 256 << 20, Reading: 64 << 20,
		PollQueue: 32 << 20, Prefetch: 16 << 20, LookupCache: 16 << 20, OutsideGo: 96 << 20,
	}
	if fmt.Sprint(m) != fmt.Sprint(want) {
		t.Fatalf("memory %+v, want %+v", m, want)
	}
	if c.HTTP.ResultsMaxBytes != 0 || c.HTTP.WebSocket.SendQueueBytes != 0 {
		t.Fatalf("API budgets set without a process budget: %d, %d", c.HTTP.ResultsMaxBytes, c.HTTP.WebSocket.SendQueueBytes)
	}
}

// With router.memory_limit_bytes the budgets the file leaves unset are
// derived from it, so that everything fits: at 298 MiB the result store
// gets 18 MiB (not 128), the pending intents what Go's share leaves, and
// the poll queue and prefetch bounds a 32nd each (not 32 and 16 MiB).
func TestMemoryBudgetsAreDerivedToFitTheProcessBudget(t *testing.T) {
	for _, size := range []int64{176 << 20, 298 << 20, 312475648, 1 << 30, 8 << 30} {
		c, err := parse(t, memBase+fmt.Sprintf("router: {memory_limit_bytes: %d}\n", size), nil)
		if err != nil {
			t.Fatalf("%d: %v", size, err)
		}
		m := c.Memory()
		if !fits(m) {
			t.Errorf("%d MiB: derived budgets do not fit: %+v", size>>20, m)
		}
		if len(m.Derived) != 6 {
			t.Errorf("%d MiB: derived %v, want all six", size>>20, m.Derived)
		}
		if m.Pending != c.Router.MaxPendingBytes || m.Results != c.HTTP.ResultsMaxBytes || m.LookupCache != int64(c.HTTP.Lookup.CacheMB)<<20 ||
			m.Waiting != c.HTTP.MaxWaitingBytes || m.Reading != c.HTTP.MaxReadingBytes ||
			m.StreamQueues != int64(c.HTTP.WebSocket.SendQueueBytes)*config.StreamQueuesCounted {
			t.Errorf("%d MiB: the configuration and its shares disagree: %+v", size>>20, m)
		}
		if c.Router.MaxPendingBytesPerTenant > c.Router.MaxPendingBytes {
			t.Errorf("%d MiB: per-tenant budget %d over the total %d", size>>20, c.Router.MaxPendingBytesPerTenant, c.Router.MaxPendingBytes)
		}
	}
	c, err := parse(t, memBase+"router: {memory_limit_bytes: 312475648}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := c.Memory()
	if m.Results != 312475648/16 || m.PollQueue != 312475648/32 || m.Prefetch != 312475648/32 || m.FeedPrefetch != m.Prefetch || m.LookupCache != 9<<20 {
		t.Fatalf("298 MiB: %+v", m)
	}
	if m.Waiting != 312475648/32 || m.Reading != 312475648/64 || c.HTTP.MaxWaitingBytesPerTenant != m.Waiting/2 || c.HTTP.MaxReadingBytesPerTenant != m.Reading/2 {
		t.Fatalf("298 MiB: waiting %d (%d a tenant), reading %d (%d a tenant)", m.Waiting, c.HTTP.MaxWaitingBytesPerTenant, m.Reading, c.HTTP.MaxReadingBytesPerTenant)
	}
	if want := m.GoLimit - config.MemoryBaseline - m.Results - m.StreamQueues - m.Waiting - m.Reading; m.Pending != want || m.Pending < 90<<20 {
		t.Fatalf("298 MiB: pending budget %d, want %d", m.Pending, want)
	}
}

// Explicit budgets that fit are kept, and the pending budget takes what they
// leave.
func TestMemoryKeepsExplicitBudgetsThatFit(t *testing.T) {
	c, err := parse(t, memBase+"router: {memory_limit_bytes: 312475648}\nhttp:\n  results_max_bytes: 8388608\n  lookup: {cache_mb: 4}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := c.Memory()
	if m.Results != 8<<20 || m.LookupCache != 4<<20 || !fits(m) {
		t.Fatalf("%+v", m)
	}
	if slices.Contains(m.Derived, "http.results_max_bytes") || !slices.Contains(m.Derived, "router.max_pending_bytes") {
		t.Fatalf("derived %v", m.Derived)
	}
	if m.Pending != m.GoLimit-config.MemoryBaseline-m.Results-m.StreamQueues-m.Waiting-m.Reading {
		t.Fatalf("pending %d does not take the rest", m.Pending)
	}
}

// Explicit values that cannot fit the process budget are refused at load
// with one line naming the file, the line and the key (the largest
// explicit one); a budget too small for what every instance needs is
// refused at its own key with the least that fits, which then loads.
func TestMemoryRefusesBudgetsThatCannotFit(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{
			"router: {memory_limit_bytes: 312475648}\nhttp:\n  results_max_bytes: 201326592\n",
			"sb.yaml:5: http.results_max_bytes: does not fit router.memory_limit_bytes (312475648 bytes): Go's share is 206 MiB",
		},
		{
			"router:\n  memory_limit_bytes: 312475648\n  max_pending_bytes: 268435456\n",
			"sb.yaml:5: router.max_pending_bytes: does not fit router.memory_limit_bytes (312475648 bytes)",
		},
		{
			"router:\n  memory_limit_bytes: 312475648\n  max_pending_bytes: 134217728\nhttp: {results_max_bytes: 67108864}\n",
			"sb.yaml:5: router.max_pending_bytes: does not fit",
		},
		{
			"router: {memory_limit_bytes: 536870912}\nhttp: {lookup: {cache_mb: 500}}\n",
			"sb.yaml:4: http.lookup.cache_mb: does not fit router.memory_limit_bytes (536870912 bytes)",
		},
		{
			"router: {memory_limit_bytes: 312475648}\nhttp:\n  max_waiting_bytes: 268435456\n",
			"sb.yaml:5: http.max_waiting_bytes: does not fit router.memory_limit_bytes (312475648 bytes)",
		},
		{
			"router: {memory_limit_bytes: 312475648}\nhttp:\n  results_max_bytes: 8388608\n  max_reading_bytes: 201326592\n",
			"sb.yaml:6: http.max_reading_bytes: does not fit router.memory_limit_bytes (312475648 bytes)",
		},
		{"router:\n  memory_limit_bytes: 104857600\n", "sb.yaml:4: router.memory_limit_bytes: 104857600 bytes is too small for an instance"},
	} {
		_, err := parse(t, memBase+tc.yaml, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, config.ErrInvalid) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v, want one line with %q", tc.yaml, err, tc.want)
		}
	}
	_, err := parse(t, memBase+"router: {memory_limit_bytes: 104857600}\n", nil)
	var least int64
	if i := strings.LastIndex(err.Error(), "at least "); i < 0 {
		t.Fatalf("no least: %v", err)
	} else if _, serr := fmt.Sscanf(err.Error()[i:], "at least %d bytes", &least); serr != nil {
		t.Fatalf("%v: %v", err, serr)
	}
	c, err := parse(t, memBase+fmt.Sprintf("router: {memory_limit_bytes: %d}\n", least), nil)
	if err != nil || !fits(c.Memory()) {
		t.Fatalf("the least budget named, %d: %v", least, err)
	}
	if _, err := parse(t, memBase+fmt.Sprintf("router: {memory_limit_bytes: %d}\n", least-1<<20), nil); err == nil {
		t.Fatalf("a MiB below the least, %d, loads", least-1<<20)
	}
}
