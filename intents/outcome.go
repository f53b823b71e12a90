package intents

import "github.com/switchboard-mcp/switchboard/schemas"

// IsFallback reports whether an outcome carries a fallback answer rather than
// the agent's own.
func IsFallback(o schemas.Outcome) bool {
	return o == schemas.OutcomeFallbackCache || o == schemas.OutcomeFallbackStatic
}

// Outcomes lists every outcome symbol, in the order of the Avro enum. Metrics
// use it to pre-create their series.
var Outcomes = []schemas.Outcome{
	schemas.OutcomeAnswered,
	schemas.OutcomeFallbackCache,
	schemas.OutcomeFallbackStatic,
	schemas.OutcomeTimedOut,
	schemas.OutcomeRejected,
	schemas.OutcomeAgentError,
	schemas.OutcomeCancelled,
	schemas.OutcomeShed,
	schemas.OutcomeCircuitOpen,
	schemas.OutcomeUnknown,
}
