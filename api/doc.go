// Package api is Switchboard's HTTP and WebSocket front door: it lets callers
// submit intents, look up their results, and stream results as they arrive.
//
// It owns:
//
//   - POST /v1/intents: validate an intent request (package intents), publish
//     it through a [Publisher], and answer 202 at once, or with ?wait=DURATION
//     hold the request until the intent's result arrives (200) or the wait
//     ends (202, status "pending").
//     Idempotent by Idempotency-Key or intent_id (idempotency.go). Before
//     publishing, [Admission] may refuse it for the backlog in Kafka
//     (admission.go), and a [WaitLimit] a caller that would wait, over the
//     callers already waiting on this instance or of its tenant (waiting.go).
//   - GET /v1/intents/{id}: the result and timeline, or the pending state,
//     of any intent (timeline.go), from this instance's memory and then an
//     [IntentLookup] (intentlookup.go: the store of every intent, package
//     api/lookup), which also answers DELETE's 409, ?wait and WebSocket
//     subscriptions by id for intents resolved before this instance read
//     them, and the MCP task lookups.
//   - GET /v1/intents/{id}/events and POST /v1/intents?stream=sse: Server-Sent
//     Events of one intent, its progress then its result (sse.go), followed
//     through a [Watch] (watch.go): the seam for any transport that follows
//     one intent for one tenant.
//   - DELETE /v1/intents/{id}: publish a cancel record for a pending intent
//     (cancel.go).
//   - GET /v1/contexts/{entity_id}: the context snapshot held for an entity
//     (contexts.go).
//   - GET /v1/stream: a WebSocket on which a client subscribes to results by
//     intent id, session id or intent type and receives each matching result
//     and timeout event (and, with progress: true, progress record) as one
//     JSON text message carrying a resume cursor;
//     a client that reconnects resumes from its cursor (resume.go, cursor.go).
//     The protocol is described on [Server.Handler] and in the README.
//   - GET /v1/agents, /v1/intent-types (agents.go), /v1/openapi.json
//     (openapi.go), the console at / (console.go, console/).
//   - GET /metrics, /healthz and /readyz.
//   - POST /v1/admin/reload: the guard of a configuration reload, for admins
//     (an API key or JWT marked so; loopback only with authentication off),
//     and its answer; the rereading and applying are the caller's
//     ([WithReload], reload.go). [Server.SetCatalog] replaces the intent
//     types the API lists and checks.
//   - the payload check of an intent type's input_schema (payload.go: 422
//     invalid_payload), and the schemas in GET /v1/intent-types and the
//     OpenAPI document;
//   - /mcp: the mount point of the MCP endpoint ([WithMCP]; package api/mcp
//     owns the protocol) behind the same guard, [TenantFrom] for it, and
//     the RFC 9728 protected-resource metadata (oauth.go);
//   - [IntentLookup]: what the MCP endpoint's tasks read, implemented by
//     [Results] from this instance's memory (lookup.go).
//   - [Results]: this instance's memory of recent intents, known by
//     (tenant, intent id) and bounded by count and bytes with eviction fair
//     between tenants (store.go), the waiters of ?wait requests
//     (waiters.go), the live counts (agents.go), and the fan-out to
//     WebSocket subscribers by one matching rule (filters.go: a
//     subscriber's filters and the index that inverts them), whose frames
//     flush shards write without blocking (flush.go, sendqueue.go,
//     socket.go).
//   - The bounds of every request: body size and read time on the injected
//     clock, no waiting for a body an answer does not need (body.go);
//     header size and time, idle connections (http.Server, set by Run).
//
// It does not own Kafka I/O: the caller (cmd/switchboard) gives [New] a
// [Publisher] that writes to the requests topic and a [History] that replays
// the results, timeouts and progress topics for resume and event streams,
// and feeds a [Feed] (which puts each intent's progress before its result,
// feed.go) from a reader of those topics; [Results.AddResult],
// [Results.AddTimeout] and [Results.AddProgress] take records directly from
// a reader that keeps that order itself. Every instance reads all of them,
// so any instance can answer any client.
//
// It owns authentication and tenants ([AuthConfig]: API keys and JWTs, RS256
// keys from a JWKS URL (jwks.go), the
// browser origin allowlist and CORS, 401/403 answers; a credential's tenant
// scopes what it submits, reads, cancels and streams: tenant.go) and the
// stream's limits (send queue in messages and bytes, keepalive, read size,
// message rate, subscriptions per connection, connections per tenant; see
// limits.go). It does not own where
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
