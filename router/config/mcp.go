package config

// MCP is http.mcp: the Model Context Protocol endpoint at /mcp, which lists
// every intent type as a tool (see the README's "Use it from an MCP
// client").
type MCP struct {
	// Disabled turns /mcp off (404). Default: served.
	Disabled bool `yaml:"disabled"`
	// ResultGrace is how long past an intent's deadline a tools/call waits
	// for its result. Default 15s.
	ResultGrace Duration `yaml:"result_grace"`
	// SSEPollAfter, when set, ends a 2025-11-25 session's response stream
	// once a call has waited this long; the client reconnects and gets the
	// result (SEP-1699 polling). Default 0: never.
	SSEPollAfter Duration `yaml:"sse_poll_after"`
	// SessionTimeout closes idle 2025-11-25 sessions. Default 30m.
	SessionTimeout Duration `yaml:"session_timeout"`
	// MaxSessions bounds the 2025-11-25 sessions open on one instance; one
	// more initialize is refused (503, a JSON-RPC error with reason
	// "mcp_sessions"). MaxSessionsPerTenant bounds one authenticated
	// tenant's (http_limits.go). Defaults 4096 and half of MaxSessions.
	MaxSessions          int `yaml:"max_sessions"`
	MaxSessionsPerTenant int `yaml:"max_sessions_per_tenant"`
}
