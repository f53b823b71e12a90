// Package mcp is Switchboard's Model Context Protocol endpoint: every
// configured intent type is an MCP tool, a tools/call publishes an intent
// and answers with its result, and a long call can be a task whose id is
// the intent id.
//
// It owns:
//
//   - the Streamable HTTP transport at /mcp, on the official SDK
//     (github.com/modelcontextprotocol/go-sdk): stateless requests of
//     protocol revision 2026-07-28 (any instance answers any request) and
//     the session handshake of 2025-11-25 and earlier (initialize,
//     Mcp-Session-Id, resumable SSE streams), told apart per request
//     (endpoint.go);
//   - tools/list from the catalog, and tools/call: the intent id derived
//     from the caller's tenant and the JSON-RPC request (callid.go), the
//     input_schema check, the wait up to the intent's own deadline, and the
//     mapping of outcomes to tool results (tools.go);
//   - notifications/cancelled, written as the same cancel record as DELETE
//     /v1/intents/{id}, and notifications/progress from a [ProgressSource]
//     (progress.go);
//   - tasks: the io.modelcontextprotocol/tasks extension of 2026-07-28 and
//     the experimental tasks/* of 2025-11-25, read through
//     [api.IntentLookup] (tasks.go): a caller without a token looks up as
//     [api.AnyTenant], as the API does with authentication off;
//   - a stdio server that forwards to a Switchboard URL (stdio.go), for
//     desktop clients that only launch local commands.
//
// It does not own authentication, tenants or the browser-origin check: the
// endpoint is mounted on the API's server ([api.WithMCP]) behind the API's
// guard, and learns the caller's tenant from [api.TenantFrom]. It does not
// own Kafka: it publishes through an [api.Publisher] and waits on the
// [api.Results] the caller feeds.
package mcp
