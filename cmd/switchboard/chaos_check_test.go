package main

// The verdict of the chaos test (chaos_integration_test.go): what the topics
// say happened to each intent the harness published, against what issue 4
// promises. It is plain data in, counts out, so that its own test below runs
// without Kafka.

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// chaosIntent is one intent the harness published, or tried to.
type chaosIntent struct {
	id      string
	payload string // the JSON payload sent
	ignored bool   // {"demo":{"ignore":true}}: the agent never answers it
	warmup  bool   // published before the load, to see the pipeline work
	acked   bool   // the broker acknowledged it
}

// window is a span of wall-clock time in unix ms, both ends included.
type window struct{ from, to int64 }

func (w window) overlaps(from, to int64) bool { return from <= w.to && to >= w.from }

// chaosObserved is what the topics held at the end, read committed.
type chaosObserved struct {
	requests    map[string]int // intent id -> records on the requests topic
	results     map[string][]*schemas.IntentResult
	timeouts    map[string][]*schemas.IntentTimeout
	answeredAt  map[string]int64 // intent id -> timestamp (unix ms) of the agent's first response
	undecodable int              // result or timeout records that did not decode
}

// Excuses for a fallback given to an intent the agent would have answered.
const (
	// agentLateMs: an agent's answer produced less than this before the
	// deadline could not be paired in time (the router still has to read it).
	agentLateMs = 500
	// resolvedLateMs: resolved this long after its deadline, its partition had
	// no owner at the deadline (the owner died; the next one resolved it when
	// it took the partition over).
	resolvedLateMs = 1000
)

// chaosVerdict counts what happened. The fields after Failures' are failures.
type chaosVerdict struct {
	Intents     int // load intents the generator tried to publish
	Warmup      int // warm-up intents: known, not judged
	SendErrors  int // publishes that returned an error
	Unpublished int // of those, never on the requests topic: excluded
	Entered     int // distinct intents on the requests topic (load and warm-up)
	RequestDups int // extra request records for the same id (producer retries)

	Results  int // result records for entered intents
	Timeouts int // timeout event records for entered intents
	Answered int // non-ignored intents answered with the agent's echo
	Fallback int // ignored intents resolved with a fallback

	// Non-ignored intents resolved with a fallback for a reason the harness
	// accepts: the intent could not have been answered in time.
	ExpiredUnowned  int // never dispatched, or resolved after its deadline by a new owner
	NeverDispatched int // of which: no dispatched_at (expired on arrival)
	ResolvedLate    int // of which: answered in time, resolved > resolvedLateMs after the deadline
	AgentLate       int // dispatched, and the agent answered < agentLateMs before the deadline, or after it
	ExpiredOutage   int // dispatched, but the broker was down between dispatch and deadline
	// PairedLate: dispatched, the agent answered at least agentLateMs before
	// the deadline with the broker up, yet its owner's timer resolved the
	// intent first (within resolvedLateMs of the deadline): the router read
	// the answer more than agentLateMs after it was written. Which of the
	// two comes first is scheduling (seen on a loaded host, in the first
	// seconds after the routers started), so it is not a broken promise
	// (the intent still has exactly one result and one timeout event); a
	// router that pairs answers late wholesale fails pairedLateOK instead.
	PairedLate int
	// Shed: non-ignored intents resolved at once with their fallback
	// (outcome shed, with a timeout event), never dispatched: the router
	// judged them too late to be answered in time (router/overload.go).
	Shed int

	// Failures.
	Missing        int // entered, no result
	Duplicate      int // entered, more than one result
	TimeoutDups    int // more than one timeout event
	TimeoutMissing int // resolved with a fallback, no timeout event
	TimeoutOrphans int // answered, yet a timeout event was published
	WrongOutcome   int // an outcome or answer the intent should not have
	LostAcked      int // acknowledged by the broker, absent from the requests topic
	Strays         int // results or timeouts for ids the harness never sent, undecodable records

	examples map[string][]string // failure -> a few ids with details
}

func (v *chaosVerdict) failures() int {
	return v.Missing + v.Duplicate + v.TimeoutDups + v.TimeoutMissing + v.TimeoutOrphans + v.WrongOutcome + v.LostAcked + v.Strays
}

// failuresUnder is failures by what delivery promises: at_least_once may
// write a second result or timeout event after a crash (README, Delivery),
// never lose one.
func (v *chaosVerdict) failuresUnder(delivery string) int {
	if delivery == config.AtLeastOnce {
		return v.failures() - v.Duplicate - v.TimeoutDups
	}
	return v.failures()
}

// pairedLateMost is the share of the answers the agent gave in time that
// the routers may lose to their own deadlines (PairedLate) before the run
// fails: far above what scheduling on a loaded host costs (7 of ~9,700 in
// the worst run seen), far below what a router that reads answers late
// as a rule would lose.
const pairedLateMost = 0.01

// pairedLateOK reports whether PairedLate is within pairedLateMost of the
// answers given in time (Answered + PairedLate).
func (v *chaosVerdict) pairedLateOK() bool {
	return float64(v.PairedLate) <= pairedLateMost*float64(v.Answered+v.PairedLate)
}

func (v *chaosVerdict) example(kind, format string, args ...any) {
	if v.examples == nil {
		v.examples = map[string][]string{}
	}
	if len(v.examples[kind]) < 5 {
		v.examples[kind] = append(v.examples[kind], fmt.Sprintf(format, args...))
	}
}

// exampleLines lists the recorded examples, one line each, sorted by kind.
func (v *chaosVerdict) exampleLines() []string {
	kinds := make([]string, 0, len(v.examples))
	for k := range v.examples {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var out []string
	for _, k := range kinds {
		for _, e := range v.examples[k] {
			out = append(out, k+": "+e)
		}
	}
	return out
}

// judge checks every intent against the promise of issue 4: an intent that
// entered Kafka has exactly one result and, when it timed out, exactly one
// timeout event; the agent's answer when it could be had in time, a fallback
// otherwise. Warm-up intents are only known (their records are not strays).
// outages are the windows in which the broker was down (and the
// time clients took to come back).
func judge(sent []chaosIntent, obs chaosObserved, agent string, outages []window) chaosVerdict {
	var v chaosVerdict
	known := make(map[string]bool, len(sent))
	for i := range sent {
		in := &sent[i]
		known[in.id] = true
		if in.warmup {
			v.Warmup++
			continue
		}
		v.Intents++
		n := obs.requests[in.id]
		if !in.acked {
			v.SendErrors++
			if n == 0 {
				v.Unpublished++
				if len(obs.results[in.id]) > 0 {
					v.Strays++
					v.example("stray", "%s was never on the requests topic but has %d result(s)", in.id, len(obs.results[in.id]))
				}
				continue
			}
		} else if n == 0 {
			v.LostAcked++
			v.example("lost_acked", "%s was acknowledged but is not on the requests topic", in.id)
			continue
		}
		v.Entered++
		v.RequestDups += n - 1
		answeredAt, answered := obs.answeredAt[in.id]
		if !answered {
			answeredAt = -1
		}
		v.judgeOne(in, obs.results[in.id], obs.timeouts[in.id], answeredAt, agent, outages)
	}
	for id, rs := range obs.results {
		if !known[id] {
			v.Strays += len(rs)
			v.example("stray", "result for %s, which the harness never sent", id)
		}
	}
	for id, ts := range obs.timeouts {
		if !known[id] {
			v.Strays += len(ts)
			v.example("stray", "timeout event for %s, which the harness never sent", id)
		}
	}
	if obs.undecodable > 0 {
		v.Strays += obs.undecodable
		v.example("stray", "%d result or timeout records did not decode", obs.undecodable)
	}
	return v
}

// judgeOne judges one intent that entered Kafka; answeredAt is when the agent
// first answered it (unix ms), -1 if it never did.
func (v *chaosVerdict) judgeOne(in *chaosIntent, rs []*schemas.IntentResult, ts []*schemas.IntentTimeout, answeredAt int64, agent string, outages []window) {
	v.Results += len(rs)
	v.Timeouts += len(ts)
	switch {
	case len(rs) == 0:
		v.Missing++
		v.example("missing", "%s (ignored=%v, timeout events %d)", in.id, in.ignored, len(ts))
		return
	}
	if len(ts) > 1 {
		v.TimeoutDups++
		v.example("timeout_dup", "%s: %d timeout events (%s)", in.id, len(ts), describeTimeouts(ts))
	}
	if len(rs) > 1 {
		// Which of its results counts is moot: the intent is judged a
		// duplicate, and nothing else.
		v.Duplicate++
		v.example("duplicate", "%s: %s", in.id, describeResults(rs))
		return
	}
	r := rs[0]
	fallback := r.Outcome == schemas.OutcomeFallbackStatic || r.Outcome == schemas.OutcomeFallbackCache
	shed := r.Outcome == schemas.OutcomeShed
	if (fallback || shed) && len(ts) == 0 {
		v.TimeoutMissing++
		v.example("timeout_missing", "%s: outcome %s and no timeout event", in.id, r.Outcome)
	}
	if r.Outcome == schemas.OutcomeAnswered && len(ts) > 0 {
		v.TimeoutOrphans++
		v.example("timeout_orphan", "%s: answered, yet %d timeout event(s) (%s)", in.id, len(ts), describeTimeouts(ts))
	}
	if shed && r.Timeline.DispatchedAt != nil {
		v.WrongOutcome++
		v.example("wrong_outcome", "%s: shed after it was dispatched", in.id)
		return
	}
	if in.ignored {
		if !fallback && !shed {
			v.WrongOutcome++
			v.example("wrong_outcome", "%s: ignored by the agent, yet outcome %s", in.id, r.Outcome)
			return
		}
		v.Fallback++
		return
	}
	switch {
	case r.Outcome == schemas.OutcomeAnswered:
		if !echoes(r.Answer, agent, in.payload) {
			v.WrongOutcome++
			v.example("wrong_outcome", "%s: answer %s is not the agent's echo of %s", in.id, answerText(r.Answer), in.payload)
			return
		}
		v.Answered++
	case shed:
		v.Shed++
	case fallback:
		tl := r.Timeline
		switch {
		case tl.DispatchedAt == nil:
			v.ExpiredUnowned++
			v.NeverDispatched++
		case overlapsAny(outages, *tl.DispatchedAt, tl.Deadline):
			v.ExpiredOutage++
		case answeredAt < 0:
			v.WrongOutcome++
			v.example("wrong_outcome", "%s: %s; dispatched %dms before its deadline, with the broker up, and the agent never answered it",
				in.id, r.Outcome, tl.Deadline-*tl.DispatchedAt)
		case answeredAt > tl.Deadline-agentLateMs:
			v.AgentLate++
		case tl.ResolvedAt-tl.Deadline > resolvedLateMs:
			v.ExpiredUnowned++
			v.ResolvedLate++
		default:
			v.PairedLate++
			v.example("paired_late", "%s: %s although the agent answered %dms before the deadline, with the broker up; dispatched %dms before it, resolved %+dms after it",
				in.id, r.Outcome, tl.Deadline-answeredAt, tl.Deadline-*tl.DispatchedAt, tl.ResolvedAt-tl.Deadline)
		}
	default:
		v.WrongOutcome++
		v.example("wrong_outcome", "%s: outcome %s (%s)", in.id, r.Outcome, describeResults(rs))
	}
}

func overlapsAny(ws []window, from, to int64) bool {
	for _, w := range ws {
		if w.overlaps(from, to) {
			return true
		}
	}
	return false
}

// echoes says whether answer is the demo agent's {"agent": agent, "echo": payload}.
func echoes(answer *schemas.JSON, agent, payload string) bool {
	if answer == nil {
		return false
	}
	var got, want any
	if json.Unmarshal([]byte(*answer), &got) != nil || json.Unmarshal(fmt.Appendf(nil, `{"agent":%q,"echo":%s}`, agent, payload), &want) != nil {
		return false
	}
	return reflect.DeepEqual(got, want)
}

func answerText(a *schemas.JSON) string {
	if a == nil {
		return "(none)"
	}
	return string(*a)
}

func describeResults(rs []*schemas.IntentResult) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		d := "-"
		if r.Timeline.DispatchedAt != nil {
			d = fmt.Sprint(*r.Timeline.DispatchedAt - r.Timeline.ReceivedAt)
		}
		parts[i] = fmt.Sprintf("%s(received %d, dispatched +%s, resolved %+dms vs deadline, attempts %d)",
			r.Outcome, r.Timeline.ReceivedAt, d, r.Timeline.ResolvedAt-r.Timeline.Deadline, r.Attempts)
	}
	return strings.Join(parts, ", ")
}

func describeTimeouts(ts []*schemas.IntentTimeout) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = fmt.Sprintf("%s/%s at %d", t.Reason, t.Fallback, t.TimedOutAt)
	}
	return strings.Join(parts, ", ")
}

// TestChaosJudge checks the verdict on a made-up run with intents of every
// kind, so that the chaos test cannot pass by miscounting.
func TestChaosJudge(t *testing.T) {
	const deadline = int64(10_000)
	ms := func(v int64) *int64 { return &v }
	answer := func(payload string) *schemas.JSON {
		a := schemas.JSON(`{"echo":` + payload + `,"agent":"chaos"}`)
		return &a
	}
	static := schemas.JSON(`{"fallback":true}`)
	res := func(outcome schemas.Outcome, a *schemas.JSON, dispatched *int64, resolved int64) *schemas.IntentResult {
		return &schemas.IntentResult{
			Outcome: outcome, Answer: a, Attempts: 1,
			Timeline: schemas.Timeline{ReceivedAt: deadline - 2000, DispatchedAt: dispatched, ResolvedAt: resolved, Deadline: deadline},
		}
	}
	answered := func(payload string) []*schemas.IntentResult {
		return []*schemas.IntentResult{res(schemas.OutcomeAnswered, answer(payload), ms(8000), 8100)}
	}
	fellBack := func(dispatched *int64, resolved int64) []*schemas.IntentResult {
		return []*schemas.IntentResult{res(schemas.OutcomeFallbackStatic, &static, dispatched, resolved)}
	}
	tout := &schemas.IntentTimeout{Reason: schemas.ReasonDeadline, Fallback: schemas.FallbackStatic}
	one := []*schemas.IntentTimeout{tout}
	const ign = `{"demo":{"ignore":true}}`
	rows := []struct {
		in         chaosIntent
		rs         []*schemas.IntentResult
		ts         []*schemas.IntentTimeout
		req        int   // request records
		answeredAt int64 // the agent's first answer; 0: none
	}{
		{chaosIntent{id: "ok", payload: `{"i":1}`, acked: true}, answered(`{"i":1}`), nil, 1, 8050},
		// Warm-up intents are not judged: not even a duplicate counts.
		{chaosIntent{id: "warm", payload: `{"w":1}`, acked: true, warmup: true}, append(answered(`{"w":1}`), fellBack(nil, 8100)...), nil, 1, 8050},
		{chaosIntent{id: "ign", payload: ign, ignored: true, acked: true}, fellBack(ms(8000), deadline), one, 1, 0},
		{chaosIntent{id: "never", payload: `{"i":2}`, acked: true}, fellBack(nil, 12000), one, 1, 0},
		{chaosIntent{id: "agentlate", payload: `{"i":3}`, acked: true}, fellBack(ms(9600), deadline), one, 1, 9700},
		{chaosIntent{id: "restored", payload: `{"i":4}`, acked: true}, fellBack(ms(8000), deadline+3000), one, 1, 8050},
		// Dispatched before the outage's window ended, never answered.
		{chaosIntent{id: "outage", payload: `{"i":5}`, acked: true}, fellBack(ms(3000), deadline), one, 1, 0},
		{chaosIntent{id: "unpublished", payload: `{"i":6}`}, nil, nil, 0, 0},
		{chaosIntent{id: "failed-but-entered", payload: `{"i":7}`}, answered(`{"i":7}`), nil, 2, 8050},
		// Failures.
		{chaosIntent{id: "missing", payload: `{"i":8}`, acked: true}, nil, nil, 1, 8050},
		// A duplicate is only a duplicate: its answered first result and the
		// timeout event of its second are not also a timeout orphan.
		{chaosIntent{id: "dup", payload: `{"i":9}`, acked: true}, append(answered(`{"i":9}`), fellBack(nil, 12000)...), one, 1, 8050},
		{chaosIntent{id: "tdup", payload: ign, ignored: true, acked: true}, fellBack(ms(8000), deadline), []*schemas.IntentTimeout{tout, tout}, 1, 0},
		{chaosIntent{id: "tmissing", payload: ign, ignored: true, acked: true}, fellBack(ms(8000), deadline), nil, 1, 0},
		{chaosIntent{id: "torphan", payload: `{"i":11}`, acked: true}, answered(`{"i":11}`), one, 1, 8050},
		{chaosIntent{id: "badecho", payload: `{"i":12}`, acked: true}, answered(`{"i":13}`), nil, 1, 8050},
		// Answered in time, resolved by its owner's timer: paired late, a
		// figure (pairedLateOK bounds it), not a broken promise.
		{chaosIntent{id: "ontime-fallback", payload: `{"i":14}`, acked: true}, fellBack(ms(8000), deadline+5), one, 1, 8050},
		{chaosIntent{id: "silent", payload: `{"i":16}`, acked: true}, fellBack(ms(8000), deadline+2), one, 1, 0},
		{chaosIntent{id: "ign-answered", payload: ign, ignored: true, acked: true}, answered(ign), nil, 1, 8050},
		{chaosIntent{id: "lost", payload: `{"i":15}`, acked: true}, nil, nil, 0, 0},
		// Shed late, never dispatched: accepted; shed once dispatched: wrong.
		{chaosIntent{id: "shed", payload: `{"i":17}`, acked: true}, []*schemas.IntentResult{res(schemas.OutcomeShed, &static, nil, 7000)}, one, 1, 0},
		{chaosIntent{id: "shed-dispatched", payload: `{"i":18}`, acked: true}, []*schemas.IntentResult{res(schemas.OutcomeShed, &static, ms(6000), 7000)}, one, 1, 0},
	}
	var sent []chaosIntent
	obs := chaosObserved{requests: map[string]int{}, results: map[string][]*schemas.IntentResult{}, timeouts: map[string][]*schemas.IntentTimeout{}, answeredAt: map[string]int64{}}
	for _, r := range rows {
		sent = append(sent, r.in)
		if r.req > 0 {
			obs.requests[r.in.id] = r.req
		}
		if r.rs != nil {
			obs.results[r.in.id] = r.rs
		}
		if r.ts != nil {
			obs.timeouts[r.in.id] = r.ts
		}
		if r.answeredAt > 0 {
			obs.answeredAt[r.in.id] = r.answeredAt
		}
	}
	obs.results["stranger"] = answered(`{}`)
	obs.undecodable = 1

	got := judge(sent, obs, "chaos", []window{{3000, 3500}})
	want := chaosVerdict{
		Intents: 20, Warmup: 1, SendErrors: 2, Unpublished: 1, Entered: 18, RequestDups: 1,
		Results: 18, Timeouts: 13, Answered: 3, Fallback: 3,
		ExpiredUnowned: 2, NeverDispatched: 1, ResolvedLate: 1, AgentLate: 1, ExpiredOutage: 1, PairedLate: 1, Shed: 1,
		Missing: 1, Duplicate: 1, TimeoutDups: 1, TimeoutMissing: 1, TimeoutOrphans: 1, WrongOutcome: 4, LostAcked: 1, Strays: 2,
	}
	got.examples = nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("verdict\n got %+v\nwant %+v", got, want)
	}

	// Without the outage, the intent the agent never answered is wrong too.
	got = judge(sent, obs, "chaos", nil)
	if got.ExpiredOutage != 0 || got.WrongOutcome != 5 {
		t.Fatalf("without outages: expired_outage=%d wrong_outcome=%d, want 0 and 5", got.ExpiredOutage, got.WrongOutcome)
	}
	if got.failures() != 1+1+1+1+1+5+1+2 {
		t.Fatalf("failures %d; examples:\n%s", got.failures(), strings.Join(got.exampleLines(), "\n"))
	}
	// at_least_once allows the duplicate and the second timeout event, not
	// the rest.
	if n, want := got.failuresUnder(config.AtLeastOnce), got.failures()-1-1; n != want || got.failuresUnder(config.ExactlyOnce) != got.failures() {
		t.Fatalf("failures under at_least_once %d (want %d), under exactly_once %d", n, want, got.failuresUnder(config.ExactlyOnce))
	}
	// One answer in four paired late is far past the bound; one in a hundred
	// and one is within it.
	if got.pairedLateOK() {
		t.Errorf("paired_late %d of %d answered in time: want not OK", got.PairedLate, got.Answered+got.PairedLate)
	}
	if within := (chaosVerdict{Answered: 100, PairedLate: 1}); !within.pairedLateOK() {
		t.Errorf("paired_late 1 of 101 answered in time: want OK")
	}
	for _, kind := range []string{"missing", "duplicate", "timeout_dup", "timeout_missing", "timeout_orphan", "wrong_outcome", "paired_late", "lost_acked", "stray"} {
		if len(got.examples[kind]) == 0 {
			t.Errorf("no example recorded for %s", kind)
		}
	}
}
