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
// The event loop runs on the goroutine that called Run. Run starts up to
// four more and owns them: it waits for the first two (through the last)
// before it closes the Source, and the watcher ends with Run's context,
// which Run cancels as it returns:
//
//   - the poll goroutine calls Source.Poll and nothing else that can block for
//     long; it hands records to the event loop over a bounded channel and
//     pauses partitions (never blocks) when the loop falls behind or the
//     pending table is full;
//   - with WithFallbackFeed, the fallback feed's reader, which hands other
//     instances' late answers to the loop;
//   - a watcher that turns Shutdown into the end of Run's context;
//   - while stopping, one that waits for the poll goroutine and the feed
//     reader, so that the loop can serve their revokes meanwhile.
//
// The event loop owns all state: the pending table, the timing wheel, the
// fallback cache, the dedup window and the delivery's state (the open
// transaction, or the offset tracker). Records, delivery acknowledgements,
// wheel ticks and configuration reloads (Reconfigure, reconfigure.go) reach
// it over channels, so the hot path takes no locks.
//
// # Delivery
//
// Each guarantee is its own type behind the delivery interface (delivery.go),
// chosen once in New: how a record's outputs are produced, how its offset is
// committed, what a tick, a revocation and the stop do. The Router keeps the
// lifecycle, the loop, ownership and takeover.
//
// exactly_once, the default (exactlyOnce, exactlyonce.go): outputs and the
// offsets of the records that caused them go into Kafka transactions through
// a TxSink. The event loop commits as soon as a transaction holds outputs
// (group commit): a commit blocks the loop, so one is in flight at a time,
// and what arrives meanwhile is the next transaction's batch; records that
// caused nothing wait at most commit_interval. A failed commit drops the work
// since the last one (the dedup window forgets the resolutions since the
// commit too) and rewinds to the committed offsets.
//
// at_least_once (atLeastOnce, atleastonce.go, with the offset tracker of
// track.go): a record's offset is stored for commit (Source.StoreOffset; the
// consumer commits what is stored) once every output it caused has been
// acknowledged by the broker: a request's once its dispatch and its pending
// changelog record are, a response's once its result and the tombstone are.
// Nothing is rolled back. An intent pending when its instance dies is not
// replayed from its request but restored from the pending changelog by the
// partition's next owner (restore.go). A record whose outputs were delivered
// but whose offset was not yet committed is read again and may cause them
// again, rarely a second result: that is what at_least_once means.
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
// The record and port types (router/port: Record, Output, Header and the
// header names, Source, Sink, TxSink, Restorer, ...), which the adapters and
// the Go client import without importing the engine; Kafka clients
// (router/kafkaio implements the ports with confluent-kafka-go), the wire
// codec (schemas), the wheel and fallback cache
// (timeouts), configuration parsing (router/config), the tracer provider and
// its exporter (router/telemetry) and HTTP (api).
package router
