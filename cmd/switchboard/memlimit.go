package main

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/router/config"
)

// memoryBaseline is what an instance's Go runtime holds besides its byte
// budgets: code, goroutines, the router's and the API's tables, codecs,
// HTTP buffers. An idle 'serve' holds 42 MiB resident in all, librdkafka's
// and pebble's memory included (BENCHMARKS.md).
const memoryBaseline = 64 << 20

// cWorkingSet is what librdkafka and the C allocator hold under load beyond
// the prefetch and the lookup cache: the producers' copies of records until
// they are acknowledged, and freed buffers the C allocator keeps. Measured:
// with 1 MB intents flowing, 96 MiB of the resident set was outside Go's
// heap against 32 MiB counted (BENCHMARKS.md, "Pending memory: what a
// pending intent costs"); idle, about 30 MiB.
const cWorkingSet = 64 << 20

// streamQueuesCounted is how many WebSocket clients' full send queues the
// derived limit makes room for: a client whose queue is full is dropped
// (1013), so many full at once is rare; more than this pushes the heap past
// the limit, which is soft.
const streamQueuesCounted = 4

// memoryBudget is the soft memory limit 'serve' gives Go's runtime, and
// what it was made of.
type memoryBudget struct {
	limit                    int64
	from                     string // "derived", "router.memory_limit_bytes" or "GOMEMLIMIT"
	pending, results, stream int64
	// outsideGo is what librdkafka and pebble allocate in C, which Go's
	// limit does not see: the router consumer's prefetch bound, the lookup
	// store's block cache and cWorkingSet. (Producers' unacknowledged
	// outputs, up to 128 MiB each while the broker is slow, can be more.)
	outsideGo int64
	// process is router.memory_limit_bytes, the whole process's budget;
	// 0 when the limit is derived.
	process int64
}

// deriveMemoryLimit is the soft limit for a configuration: the Go-side byte
// budgets (the pending intents, the API's result store, four WebSocket send
// queues) plus memoryBaseline; or, when router.memory_limit_bytes is set,
// that budget for the whole process less what librdkafka and pebble hold
// outside Go (at least memoryBaseline).
func deriveMemoryLimit(cfg *config.Config, apiCfg api.Config) memoryBudget {
	b := memoryBudget{from: "derived", pending: cfg.Router.MaxPendingBytes, results: cfg.HTTP.ResultsMaxBytes}
	if b.results <= 0 {
		b.results = api.DefaultResultsMaxBytes
	}
	b.stream = int64(apiCfg.SendQueueBytes)
	if b.stream <= 0 {
		b.stream = api.DefaultSendQueueBytes
	}
	b.stream *= streamQueuesCounted
	b.outsideGo = 16<<20 + int64(cfg.HTTP.Lookup.CacheMB)<<20 + cWorkingSet
	b.limit = b.pending + b.results + b.stream + memoryBaseline
	if p := cfg.Router.MemoryLimitBytes; p > 0 {
		b.process, b.from = p, "router.memory_limit_bytes"
		b.limit = max(p-b.outsideGo, memoryBaseline)
	}
	return b
}

// applyMemoryLimit sets Go's soft memory limit unless GOMEMLIMIT is set
// (the runtime has read it then), logs the limit in force and the process's
// memory budget (router.memory_limit_bytes when set, otherwise Go's limit
// in force plus what librdkafka and pebble hold outside Go: 576 MiB with
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
	if need := b.pending + memoryBaseline; b.from != "derived" && b.limit < need {
		log.Warn("the memory limit leaves the pending intents less than their budget: intake pauses when Go's live heap reaches 90% of the limit, before router.max_pending_bytes",
			"limit_mib", b.limit>>20, "from", b.from, "pending_mib", b.pending>>20, "baseline_mib", memoryBaseline>>20,
			"fix", "raise router.memory_limit_bytes or lower router.max_pending_bytes")
	}
	log.Info("memory limit set", "limit_mib", b.limit>>20, "from", b.from, "process_mib", b.process>>20,
		"pending_mib", b.pending>>20, "results_mib", b.results>>20, "stream_queues_mib", b.stream>>20, "baseline_mib", memoryBaseline>>20,
		"outside_go_mib", b.outsideGo>>20, "process_budget_mib", process>>20, "resident_set_check", b.process > 0)
	return b.process
}
