package mcp

// Progress is one progress report of an intent's agent: how far it is
// (Progress, increasing), out of Total when known (0: unknown), and a
// message for people.
type Progress struct {
	Progress float64
	Total    float64
	Message  string
}

// ProgressSource delivers an intent's progress reports as they arrive. A
// tools/call that carries a progress token subscribes to its intent and
// forwards each report as notifications/progress, in order, until the
// result comes.
//
// SubscribeProgress calls f for every report of the intent (tenant, id)
// from now on, in order, from one goroutine at a time, until stop is
// called; after stop returns, f is not called again. It must not block on
// f's caller, and must be safe for concurrent use.
//
// Today no implementation reaches the API (agents' progress messages stay
// in the router); the Kafka source comes with the progress stream (issue
// 18). Tests use a fake.
type ProgressSource interface {
	SubscribeProgress(tenant, intentID string, f func(Progress)) (stop func())
}

// noProgress is the source when none is configured: nothing ever arrives.
type noProgress struct{}

func (noProgress) SubscribeProgress(string, string, func(Progress)) func() { return func() {} }
