// Package router is Switchboard's engine. It consumes intent requests and
// agent responses from Kafka, dispatches each intent to its agent's topic,
// pairs responses with pending intents by id, times intents out on a timing
// wheel, resolves them with a fallback, and writes exactly one result per
// intent, after the intent's progress records (progress.go).
//
// # Identity
//
// An intent is (tenant, intent_id), tenant "" when it has none: two tenants
// may use one id and have two intents, each with its one result. The
// pending table, the dedup window, cancels and pairing are keyed by both
// (identity.go, pairing.go); records keep the bare id as their Kafka key.
// Memory is bounded by count (max_pending) and by bytes, in total and per
// tenant (budget.go).
//
// # Goroutines
//
// Run starts two goroutines and owns both:
//
//   - the poll goroutine calls Source.Poll and nothing else that can block for
//     long; it hands records to the event loop over a bounded channel and
//     pauses partitions (never blocks) when the loop falls behind or the
//     pending table is full;
//   - the event loop (the goroutine that called Run) owns all state: the
//     pending table, the timing wheel, the fallback cache, the dedup window
//     and the offset tracker. Records, delivery acknowledgements, wheel
//     ticks and configuration reloads (Reconfigure, reconfigure.go) reach
//     it over channels, so the hot path takes no locks.
//
// # Delivery
//
// at_least_once: a record's offset is stored for commit only after everything
// it caused has been acknowledged by the broker. A request causes its dispatch
// and, eventually, its result, so its offset is held until the intent is
// resolved and the result acknowledged: an instance that dies with intents
// pending leaves their requests uncommitted, and whoever owns the partition
// next replays them. Replays may dispatch an intent again and, rarely, write a
// second result for it; that is what at_least_once means.
//
// exactly_once (txn.go): outputs and the offsets of the records that caused
// them go into Kafka transactions through a TxSink. The event loop commits
// as soon as a transaction holds outputs (group commit): a commit blocks the
// loop, so one is in flight at a time, and what arrives meanwhile is the
// next transaction's batch; records that caused nothing wait at most
// commit_interval. A failed commit drops the work since the last one and
// rewinds to the committed offsets.
//
// # Traces
//
// With WithTracerProvider the event loop makes each intent's spans
// (tracing.go: intent, dispatch per attempt, answer, timeout, resolve) on
// its own clock and hands them to the provider without waiting; without
// it, the hooks are nil checks.
//
// # What it does not own
//
// Kafka clients (router/kafkaio implements Source and Sink with
// confluent-kafka-go), the wire codec (schemas), the wheel and fallback cache
// (timeouts), configuration parsing (router/config), the tracer provider and
// its exporter (router/telemetry) and HTTP (api).
package router
