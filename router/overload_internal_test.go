package router

import "testing"

// The answer time estimate follows the answers: RFC 6298's smoothing of the
// mean (gain 1/8), no deviation added.
func TestAnswerLatencyFollowsAnswers(t *testing.T) {
	var l answerLatency
	at := int64(0)
	observe := func(ms int64) { at += 10; l.observe(at, at+ms) }
	if l.expected() != 0 {
		t.Fatalf("expected %d before any answer, want 0", l.expected())
	}
	observe(100)
	if e := l.expected(); e != 100 {
		t.Fatalf("expected after one answer of 100 ms: %d, want 100", e)
	}
	observe(900) // 100 + 800/8
	if e := l.expected(); e != 200 {
		t.Fatalf("expected after answers of 100 and 900 ms: %d, want 200", e)
	}
	for range 60 {
		observe(400) // the agent slows down
	}
	if e := l.expected(); e < 400 || e > 401 {
		t.Fatalf("expected after steady 400 ms answers: %d, want about 400", e)
	}
	for range 30 { // a spread of 600 and 1,000 ms: the mean, not a bound above it
		observe(600)
		observe(1000)
	}
	if e := l.expected(); e < 760 || e > 840 {
		t.Fatalf("expected after answers of 600 and 1,000 ms: %d, want about 800", e)
	}
}

// A probe (an intent the estimate called late, sent with nothing in flight)
// refreshes a stale estimate at its first answer, from it or a later
// dispatch; answers to dispatches before it no longer count.
func TestAnswerLatencyProbeReplacesAStaleEstimate(t *testing.T) {
	a := &agentRoute{shedsLate: true}
	for i := range 8 {
		a.latency.observe(int64(i), int64(i)+9000) // answers held 9 s by an outage
	}
	if e := a.latency.expected(); e != 9000 {
		t.Fatalf("expected %d, want 9000", e)
	}
	if a.late(&pending{deadline: 12_000}, 10_000) {
		t.Fatal("shed with nothing in flight: it is the probe")
	}
	a.inFlight = 2 // the probe, then one more intent sent with room
	if !a.late(&pending{deadline: 12_100}, 10_100) {
		t.Fatal("not shed with the stale estimate while the probe is in flight")
	}
	a.latency.observe(5_000, 10_150) // an answer to a dispatch before the probe: the old estimate moves
	if e := a.latency.expected(); e >= 9000 || e < 8000 {
		t.Fatalf("expected %d after an older answer, want between 8000 and 9000", e)
	}
	a.latency.observe(10_000, 10_200) // the probe's answer: 200 ms
	if e := a.latency.expected(); e != 200 {
		t.Fatalf("expected %d after the probe's answer of 200 ms, want 200", e)
	}
	a.latency.observe(1_000, 10_300) // a straggler from before the probe: ignored
	if e := a.latency.expected(); e != 200 {
		t.Fatalf("expected %d after a straggler dispatched before the probe, want 200", e)
	}
	if a.late(&pending{deadline: 12_300}, 10_300) {
		t.Fatal("shed a fresh intent after the probe answered in 200 ms")
	}
	a.latency.observe(10_250, 10_650) // later answers smooth again: 200 + 200/8
	if e := a.latency.expected(); e != 225 {
		t.Fatalf("expected %d, want 225", e)
	}
}

// The adaptive limit halves once per round trip on timeouts, never below
// min_in_flight, and grows back by one per limit's worth of answers while it
// binds, never above max_in_flight.
func TestInFlightLimitAIMD(t *testing.T) {
	a := &agentRoute{maxInFlight: 8}
	a.limit = inFlightLimit{on: true, floor: 1, limit: 8}
	p := func(dispatched int64) *pending { return &pending{dispatched: dispatched} }

	a.inFlight = 8
	a.observe(p(100), outcomeTimedOut, 1000)
	if got := a.inFlightCap(); got != 4 {
		t.Fatalf("limit after a timeout with 8 in flight: %d, want 4", got)
	}
	a.observe(p(200), outcomeTimedOut, 1001) // dispatched before the cut: same congestion
	if got := a.inFlightCap(); got != 4 {
		t.Fatalf("limit after a second timeout of the same round: %d, want 4", got)
	}
	a.observe(p(1000), outcomeIdle, 1500) // one intent's silence is not congestion
	if got := a.inFlightCap(); got != 4 {
		t.Fatalf("limit after an idle timeout: %d, want 4", got)
	}
	for i, want := range []int{2, 1, 1} { // dispatched after each cut: cut again
		a.inFlight = 8
		a.observe(p(3000+10*int64(i)), outcomeTimedOut, 3005+10*int64(i))
		if got := a.inFlightCap(); got != want {
			t.Fatalf("limit after cut %d: %d, want %d", i+2, got, want)
		}
	}

	a.inFlight = 0 // an answer while the limit does not bind: no growth
	a.observe(p(4000), outcomeAnswered, 4010)
	if got := a.limit.limit; got != 1 {
		t.Fatalf("limit grew to %v while it did not bind", got)
	}
	answers := 0
	for a.inFlightCap() < 8 {
		a.inFlight = a.inFlightCap() // it binds
		a.observe(p(5000), outcomeAnswered, 5010)
		if answers++; answers > 100 {
			t.Fatalf("limit %v after 100 answers in time", a.limit.limit)
		}
	}
	if answers < 20 || answers > 40 { // about 1+2+...+7 = 28: one per limit's worth
		t.Fatalf("%d answers to grow from 1 to 8, want about 28", answers)
	}
	a.inFlight = 8
	for range 50 {
		a.observe(p(6000), outcomeAnswered, 6010)
	}
	if got := a.inFlightCap(); got != 8 {
		t.Fatalf("limit %d above max_in_flight 8", got)
	}
	a.observe(p(6000), outcomeErrored, 6010) // an error answer is an answer
	if got := a.inFlightCap(); got != 8 {
		t.Fatalf("limit %d after an error answer", got)
	}
}
