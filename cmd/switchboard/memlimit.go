package main

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strings"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/router/config"
)

// memoryBaseline is what an instance's Go runtime holds besides its byte
// budgets (config.MemoryBaseline).
const memoryBaseline = config.MemoryBaseline

// memoryBudget is the soft memory limit 'serve' gives Go's runtime, and
// what it was made of (config.Memory).
type memoryBudget struct {
	limit                    int64
	from                     string // "derived", "router.memory_limit_bytes" or "GOMEMLIMIT"
	pending, results, stream int64
	// waiting and reading are what callers' requests may hold:
	// http.max_waiting_bytes and http.max_reading_bytes.
	waiting, reading int64
	// outsideGo is what librdkafka and pebble allocate in C, which Go's
	// limit does not see: the prefetch bounds of the router's consumer and
	// (with a process budget) of the results reader, the lookup store's
	// block cache and librdkafka's working set. (Producers' unacknowledged
	// outputs, up to 128 MiB each while the broker is slow, can be more.)
	outsideGo int64
	// pollQueue, prefetch and feedPrefetch are the buffers outside the
	// pending intents' budget that router.memory_limit_bytes scales (for
	// the log).
	pollQueue, prefetch, feedPrefetch int64
	// process is router.memory_limit_bytes, the whole process's budget;
	// 0 when the limit is derived.
	process int64
	// derived names the byte budgets derived from router.memory_limit_bytes
	// because the file left them unset.
	derived []string
}

// deriveMemoryLimit is the soft limit for a configuration: the Go-side byte
// budgets (the pending intents, the API's result store, four WebSocket send
// queues, the waiting callers' requests and the bodies being read) plus
// memoryBaseline; or, when router.memory_limit_bytes is set,
// that budget for the whole process less what librdkafka and pebble hold
// outside Go. With the budget set, the configuration has derived the byte
// budgets it left unset so that they fit, and refused explicit ones that
// do not (router/config/memory.go), so the limit holds them all.
func deriveMemoryLimit(cfg *config.Config, apiCfg api.Config) memoryBudget {
	m := cfg.Memory()
	b := memoryBudget{
		limit: m.GoLimit, from: "derived", pending: m.Pending, results: m.Results, stream: m.StreamQueues,
		waiting: m.Waiting, reading: m.Reading, outsideGo: m.OutsideGo, pollQueue: m.PollQueue, prefetch: m.Prefetch, feedPrefetch: m.FeedPrefetch, derived: m.Derived,
	}
	if apiCfg.SendQueueBytes > 0 {
		b.stream = int64(apiCfg.SendQueueBytes) * config.StreamQueuesCounted
	}
	if m.Process > 0 {
		b.process, b.from = m.Process, "router.memory_limit_bytes"
		b.limit = max(m.GoLimit, memoryBaseline)
	}
	return b
}

// applyMemoryLimit sets Go's soft memory limit unless GOMEMLIMIT is set
// (the runtime has read it then), logs the limit in force and the process's
// memory budget (router.memory_limit_bytes when set, otherwise Go's limit
// in force plus what librdkafka and pebble hold outside Go: 896 MiB with
// the defaults), and returns router.memory_limit_bytes, or 0 when it is
// unset. The router pauses its intake when the process's resident set
// reaches 90% of that budget while intents are pending
// (router.WithProcessMemory): it is "the configured byte budget" an
// operator holds the process to (README, "Limits").
//
// The limit is soft: the collector works harder as the heap nears it, but
// never fails an allocation for it. The router pauses its intake before
// that: once the live heap reaches 90% of the limit, the requests
// partitions pause until it is below 81% (router/budget.go), so the
// pending intents yield to what else the heap holds and the collector keeps
// a tenth of the limit to work in. When what is live passes the limit
// anyway (the result store and stream queues at their budgets, or a limit
// set below the baseline), the collector runs back to back for at most
// about half the CPU time (the runtime's GC CPU limiter), so the process
// slows rather than spirals, and the heap grows past the limit as Go would
// without one.
func applyMemoryLimit(b memoryBudget, log *slog.Logger) (process int64) {
	if b.process > 0 && boundCAllocator() {
		log.Info("C allocator bounded for the process budget", "malloc_arena_max", 2, "malloc_mmap_threshold_kib", 128)
	}
	// The resident-set check holds the process to router.memory_limit_bytes
	// only: the budget derived from the defaults (or GOMEMLIMIT) is logged,
	// not enforced on the resident set. With the defaults the resident set
	// stayed within it without the check (BENCHMARKS.md), and a process
	// that hosts serve beside other work (a test binary under the race
	// detector, whose shadow memory is resident too) would pause its intake
	// for memory that is not the router's: CI's integration tests did.
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		limit := debug.SetMemoryLimit(-1)
		derived := b.process
		if derived == 0 && limit < math.MaxInt64-b.outsideGo {
			derived = limit + b.outsideGo
		}
		log.Info("memory limit from GOMEMLIMIT", "GOMEMLIMIT", v, "limit_bytes", limit, "process_budget_mib", derived>>20,
			"resident_set_check", b.process > 0)
		return b.process
	}
	process = b.process
	if process == 0 {
		process = b.limit + b.outsideGo
	}
	debug.SetMemoryLimit(b.limit)
	log.Info("memory limit set", "limit_mib", b.limit>>20, "from", b.from, "process_mib", b.process>>20,
		"pending_mib", b.pending>>20, "results_mib", b.results>>20, "stream_queues_mib", b.stream>>20,
		"waiting_mib", b.waiting>>20, "reading_mib", b.reading>>20, "baseline_mib", memoryBaseline>>20,
		"outside_go_mib", b.outsideGo>>20, "poll_queue_mib", b.pollQueue>>20, "prefetch_mib", b.prefetch>>20, "feed_prefetch_mib", b.feedPrefetch>>20,
		"process_budget_mib", process>>20, "resident_set_check", b.process > 0, "derived_from_budget", strings.Join(b.derived, ","))
	return b.process
}
