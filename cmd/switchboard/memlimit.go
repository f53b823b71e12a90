package main

import (
	"log/slog"
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
	// limit does not see: the router consumer's prefetch bound and the
	// lookup store's block cache. (Producers' unacknowledged outputs, up to
	// 128 MiB each, are C memory too, held only while the broker is slow.)
	outsideGo int64
}

// deriveMemoryLimit is the soft limit for a configuration: the Go-side byte
// budgets (the pending intents, the API's result store, four WebSocket send
// queues) plus memoryBaseline, or router.memory_limit_bytes when set.
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
	b.outsideGo = 16<<20 + int64(cfg.HTTP.Lookup.CacheMB)<<20
	b.limit = b.pending + b.results + b.stream + memoryBaseline
	if cfg.Router.MemoryLimitBytes > 0 {
		b.limit, b.from = cfg.Router.MemoryLimitBytes, "router.memory_limit_bytes"
	}
	return b
}

// applyMemoryLimit sets Go's soft memory limit unless GOMEMLIMIT is set
// (the runtime has read it then), and logs the limit in force.
//
// The limit is soft: the collector works harder as the heap nears it, but
// never fails an allocation for it. When what is live is above the limit
// (a budget passed, or a limit set below the live heap), the collector runs
// back to back for at most about half the CPU time (the runtime's GC CPU
// limiter), so the process slows rather than spirals, and the heap grows
// past the limit as Go would without one.
func applyMemoryLimit(b memoryBudget, log *slog.Logger) {
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		log.Info("memory limit from GOMEMLIMIT", "GOMEMLIMIT", v, "limit_bytes", debug.SetMemoryLimit(-1))
		return
	}
	debug.SetMemoryLimit(b.limit)
	if need := b.pending + memoryBaseline; b.from != "derived" && b.limit < need {
		log.Warn("the memory limit is below the pending budget plus the baseline: with the pending intents at their budget the heap runs past it, and the collector works back to back",
			"limit_mib", b.limit>>20, "from", b.from, "pending_mib", b.pending>>20, "baseline_mib", memoryBaseline>>20,
			"fix", "raise router.memory_limit_bytes or lower router.max_pending_bytes")
	}
	log.Info("memory limit set", "limit_mib", b.limit>>20, "from", b.from,
		"pending_mib", b.pending>>20, "results_mib", b.results>>20, "stream_queues_mib", b.stream>>20, "baseline_mib", memoryBaseline>>20,
		"outside_go_mib", b.outsideGo>>20)
}
