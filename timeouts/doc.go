// Package timeouts owns the router's two time-keyed structures: the timing
// wheel that holds the deadline of every pending intent, and the fallback cache
// that keeps the last good answer per (intent type, cache key).
//
// Both are plain data structures owned by the router's single event-loop
// goroutine. Neither is safe for concurrent use, neither starts a goroutine,
// and neither reads a clock: every time is passed in as absolute unix
// milliseconds. The clock (an injected clockwork.Clock) and the one ticker that
// drives Wheel.Advance belong to the router's event loop, not to this package.
//
// The Wheel is a hierarchical timing wheel in the manner of Kafka's purgatory:
// schedule, cancel and expiry cost O(1) amortised, entries live in a slab
// rather than one heap object each, and a large jump of the clock skips empty
// slots instead of walking them. See Wheel for the contract.
package timeouts
