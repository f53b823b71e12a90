// Package api is Switchboard's HTTP and WebSocket front door: it lets callers
// submit intents, look up their results, and stream results as they arrive.
//
// It owns:
//
//   - POST /v1/intents: validate an intent request (package intents), publish
//     it through a [Publisher], and answer 202 at once, or with ?wait=DURATION
//     hold the request until the intent's result arrives (200) or the wait
//     ends (202, status "pending").
//     Idempotent by Idempotency-Key or intent_id (idempotency.go).
//   - GET /v1/intents/{id}: the result and timeline, or the pending state,
//     of any intent (timeline.go), from this instance's memory and then an
//     [IntentLookup] (intentlookup.go: the store of every intent, package
//     api/lookup), which also answers DELETE's 409, ?wait and WebSocket
//     subscriptions by id for intents resolved before this instance read
//     them, and the MCP task lookups.
//   - DELETE /v1/intents/{id}: publish a cancel record for a pending intent
//     (cancel.go).
//   - GET /v1/contexts/{entity_id}: the context snapshot held for an entity
//     (contexts.go).
//   - GET /v1/stream: a WebSocket on which a client subscribes to results by
//     intent id, session id or intent type and receives each matching result
//     and timeout event as one JSON text message carrying a resume cursor;
//     a client that reconnects resumes from its cursor (resume.go, cursor.go).
//     The protocol is described on [Server.Handler] and in the README.
//   - GET /v1/agents, /v1/intent-types (agents.go), /v1/openapi.json
//     (openapi.go), the console at / (console.go, console/).
//   - GET /metrics, /healthz and /readyz.
//   - [Results]: this instance's bounded memory of recent results, the waiters
//     of ?wait requests, the live counts, and the fan-out to WebSocket
//     subscribers, whose frames flush shards write without blocking
//     (flush.go, sendqueue.go, socket.go).
//
// It does not own Kafka I/O: the caller (cmd/switchboard) gives [New] a
// [Publisher] that writes to the requests topic and a [History] that replays
// the results and timeouts topics for resume, and feeds [Results.Begin],
// [Results.AddResult] and [Results.AddTimeout] from a reader of those topics.
// Every instance reads all of them, so any instance can answer any client.
//
// It owns authentication and tenants ([AuthConfig]: API keys and JWTs, the
// browser origin allowlist and CORS, 401/403 answers; a credential's tenant
// scopes what it submits, reads, cancels and streams) and the stream's limits
// (send queue, keepalive, read size, message rate, subscriptions per
// connection, connections per tenant; see limits.go). It does not own where
// secrets come from: the caller resolves them (cmd/switchboard reads the
// environment).
//
// Time comes from an injected clockwork.Clock ([WithClock]), so ?wait
// deadlines, WebSocket keepalives and request durations follow a fake clock in
// tests.
//
// Lifecycle: [New] starts nothing. [Server.Run] listens and serves until its
// context ends or [Server.Shutdown] is called. [Server.Handler] may instead be
// mounted on a server the caller owns; [Server.Shutdown] must then still be
// called to close WebSocket connections and stop the keepalive and flush
// goroutines.
package api
