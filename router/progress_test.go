package router_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/schemas"
)

const progressT = config.DefaultProgress

const progressConfig = `
agents:
  echo: {}
intents:
  write:    {agent: echo, timeout: 1s, progress: {max_per_intent: 3, max_bytes: 64}}
  streamed: {agent: echo, timeout: 1s, idle_timeout: 100ms}
  retried:  {agent: echo, timeout: 2s, retry: {max_retries: 1, backoff: 100ms, max_backoff: 100ms}}
topics:
  partitions: 1
router:
  commit_interval: 2ms
`

// progressMsg is an agent's progress message; seq 0 sends none, attempt 0
// none.
type progressMsg struct {
	attempt int32
	seq     int64
	message string
	partial string
}

func (h *harness) progress(id string, m progressMsg) {
	h.t.Helper()
	resp := &schemas.AgentResponse{RequestID: id, Agent: "echo", Status: schemas.StatusProgress}
	if m.attempt > 0 {
		resp.Attempt = &m.attempt
	}
	if m.seq > 0 {
		resp.Sequence = &m.seq
	}
	if m.message != "" {
		resp.Message = &m.message
	}
	if m.partial != "" {
		resp.Partial = schemas.Ptr(schemas.JSON(m.partial))
	}
	h.push(responses, id, resp)
}

// published returns the IntentProgress records of the progress topic.
func (h *harness) published() []*schemas.IntentProgress {
	h.t.Helper()
	var out []*schemas.IntentProgress
	for _, o := range h.sink.Outputs(progressT) {
		var p schemas.IntentProgress
		if err := h.codec.Decode(o.Value, &p); err != nil {
			h.t.Fatal(err)
		}
		if string(o.Key) != p.IntentID {
			h.t.Fatalf("progress of %s keyed %q", p.IntentID, o.Key)
		}
		out = append(out, &p)
	}
	return out
}

func (h *harness) dropped(reason string) float64 {
	return h.counter("switchboard_progress_dropped_total", "reason", reason)
}

func TestProgressIsPublishedInOrderBeforeTheResult(t *testing.T) {
	both(t, testProgressIsPublishedInOrderBeforeTheResult)
}

func testProgressIsPublishedInOrderBeforeTheResult(t *testing.T, delivery string) {
	h := start(t, progressConfig, delivery)
	h.request("w-1", "streamed", `{}`, func(r *schemas.IntentRequest) {
		r.Tenant, r.SessionID = schemas.Ptr("acme"), schemas.Ptr("s-1")
	})
	h.wait(echoTopic, 1)
	words := []string{"Kafka ", "keeps ", "order"}
	for i, w := range words {
		h.progress("w-1", progressMsg{attempt: 1, seq: int64(i + 1), message: "writing", partial: fmt.Sprintf(`{"text":%q}`, w)})
	}
	h.answer("w-1", "echo", `{"text":"Kafka keeps order"}`)
	res := h.result(1)
	got := h.published()
	if len(got) != 3 {
		t.Fatalf("%d progress records, want 3", len(got))
	}
	for i, p := range got {
		if p.Sequence != int64(i+1) || p.Attempt != 1 || p.IntentType != "streamed" || p.Agent != "echo" ||
			p.Tenant == nil || *p.Tenant != "acme" || p.SessionID == nil || *p.SessionID != "s-1" ||
			*p.Message != "writing" || string(*p.Partial) != fmt.Sprintf(`{"text":%q}`, words[i]) || p.ReceivedAt != t0.UnixMilli() {
			t.Fatalf("progress %d: %+v", i+1, p)
		}
	}
	if res.ProgressCount == nil || *res.ProgressCount != 3 {
		t.Fatalf("result progress_count %v, want 3", res.ProgressCount)
	}
	// Progress after the result is dropped, as is progress for an id
	// nobody knows.
	h.progress("w-1", progressMsg{attempt: 1, seq: 4})
	h.progress("nobody", progressMsg{})
	h.settle()
	if n := len(h.published()); n != 3 {
		t.Fatalf("%d progress records after the result, want 3", n)
	}
	if h.dropped("resolved") != 1 || h.dropped("unknown") != 1 {
		t.Fatalf("dropped resolved %v, unknown %v", h.dropped("resolved"), h.dropped("unknown"))
	}
	// An intent without progress has no progress_count.
	h.request("w-2", "streamed", `{}`)
	h.wait(echoTopic, 2)
	h.answer("w-2", "echo", `{}`)
	if res := h.result(2); res.ProgressCount != nil {
		t.Fatalf("progress_count %d without progress", *res.ProgressCount)
	}
}

// Out of sequence, from an old attempt, over the count or the bytes cap:
// counted and dropped; the result still comes, its progress_count saying
// what was published.
func TestProgressDropsBadInput(t *testing.T) { both(t, testProgressDropsBadInput) }

func testProgressDropsBadInput(t *testing.T, delivery string) {
	h := start(t, progressConfig, delivery)

	// Sequence: a repeat and a step back are dropped; no sequence is not
	// checked.
	h.request("s-1", "streamed", `{}`)
	h.wait(echoTopic, 1)
	h.progress("s-1", progressMsg{seq: 2})
	h.progress("s-1", progressMsg{seq: 2})
	h.progress("s-1", progressMsg{seq: 1})
	h.progress("s-1", progressMsg{})
	h.progress("s-1", progressMsg{seq: 5})
	h.settle()
	if n, d := len(h.published()), h.dropped("out_of_sequence"); n != 3 || d != 2 {
		t.Fatalf("published %v, dropped out_of_sequence %v; want 3, 2", n, d)
	}

	// An old attempt's progress: the first attempt failed and was retried.
	h.request("r-1", "retried", `{}`)
	h.wait(echoTopic, 2)
	h.respond("r-1", "echo", schemas.StatusError, &schemas.ErrorInfo{Code: "busy", Retryable: true}, 1)
	h.settle()
	h.progress("r-1", progressMsg{attempt: 1}) // waiting for the retry: no attempt in flight
	h.advance(101 * time.Millisecond)
	h.wait(echoTopic, 3)
	h.progress("r-1", progressMsg{attempt: 1, seq: 9}) // the retried attempt's
	h.progress("r-1", progressMsg{attempt: 2, seq: 1}) // a retry starts its sequence over
	h.settle()
	if d := h.dropped("stale_attempt"); d != 2 {
		t.Fatalf("dropped stale_attempt %v, want 2", d)
	}
	last := h.published()[len(h.published())-1]
	if last.IntentID != "r-1" || last.Attempt != 2 || last.Sequence != 1 {
		t.Fatalf("retry's progress %+v", last)
	}

	// A flood beyond max_per_intent (3): the rest is dropped, the result
	// is not.
	h.request("f-1", "write", `{}`)
	h.wait(echoTopic, 4)
	for i := 1; i <= 10; i++ {
		h.progress("f-1", progressMsg{seq: int64(i), partial: `"x"`})
	}
	h.answer("f-1", "echo", `{"done":true}`)
	h.settle()
	res := h.resultFor("f-1")
	if res.Outcome != schemas.OutcomeAnswered || res.ProgressCount == nil || *res.ProgressCount != 3 {
		t.Fatalf("flooded intent's result %+v (progress_count %v)", res, res.ProgressCount)
	}
	if d := h.dropped("capped"); d != 7 {
		t.Fatalf("dropped capped %v, want 7", d)
	}

	// An oversized partial (max_bytes 64 in all): dropped, and so is the
	// rest of the intent's progress, so that clients see a prefix.
	h.request("b-1", "write", `{}`)
	h.wait(echoTopic, 5)
	h.progress("b-1", progressMsg{partial: `"small"`})
	h.progress("b-1", progressMsg{partial: `"` + strings.Repeat("x", 100) + `"`})
	h.progress("b-1", progressMsg{partial: `"small"`})
	h.answer("b-1", "echo", `{}`)
	h.settle()
	res = h.resultFor("b-1")
	if res.ProgressCount == nil || *res.ProgressCount != 1 {
		t.Fatalf("oversized: progress_count %v, want 1", res.ProgressCount)
	}
	if d := h.dropped("capped"); d != 9 {
		t.Fatalf("dropped capped %v, want 9", d)
	}
	for _, p := range h.published() {
		if p.IntentID == "b-1" && len(*p.Partial) > 64 {
			t.Fatalf("published an oversized partial: %d bytes", len(*p.Partial))
		}
	}
}

// A fake-clock test with the new record: each progress is published and
// keeps the idle timeout from firing, and steady progress never extends the
// hard deadline.
func TestProgressRecordsKeepIdleButNotTheDeadline(t *testing.T) {
	both(t, testProgressRecordsKeepIdleButNotTheDeadline)
}

func testProgressRecordsKeepIdleButNotTheDeadline(t *testing.T, delivery string) {
	h := start(t, progressConfig, delivery)
	h.request("i-1", "streamed", `{}`)
	h.wait(echoTopic, 1)
	n := 0
	for h.clock.Since(t0) < 950*time.Millisecond {
		h.advance(60 * time.Millisecond) // idle_timeout is 100ms
		h.progress("i-1", progressMsg{seq: int64(n + 1), partial: `"w "`})
		n++
		h.wait(progressT, n)
	}
	if c := h.sink.Count(results); c != 0 {
		t.Fatalf("resolved while progress kept coming (%d results)", c)
	}
	h.advance(60 * time.Millisecond) // past the 1s deadline, 60ms after the last progress
	if to := h.timeoutEvent(1); to.Reason != schemas.ReasonDeadline {
		t.Fatalf("timed out %+v, want reason deadline", to)
	}
	res := h.result(1)
	if res.Outcome != schemas.OutcomeTimedOut || res.ProgressCount == nil || *res.ProgressCount != int64(n) {
		t.Fatalf("result %+v, progress_count %v, want %d", res, res.ProgressCount, n)
	}
}

// A takeover continues where the last commit left: the numbering, the
// agent's sequence and the cap.
func TestProgressStateSurvivesATakeOver(t *testing.T) { both(t, testProgressStateSurvivesATakeOver) }

func testProgressStateSurvivesATakeOver(t *testing.T, delivery string) {
	a := start(t, progressConfig, delivery)
	a.request("w-1", "write", `{}`)
	a.wait(echoTopic, 1)
	a.progress("w-1", progressMsg{seq: 1, partial: `"a"`})
	a.progress("w-1", progressMsg{seq: 2, partial: `"b"`})
	a.wait(progressT, 2)
	a.handOver()
	a.waitState(func(pi *schemas.PendingIntent) bool {
		return pi.ProgressSequence != nil && *pi.ProgressSequence == 2
	}, "w-1")

	b := start(t, progressConfig, delivery, router.WithRestorer(a.changelog()))
	b.settle()
	b.progress("w-1", progressMsg{seq: 2, partial: `"b"`}) // redelivered: already published
	b.progress("w-1", progressMsg{seq: 3, partial: `"c"`})
	b.progress("w-1", progressMsg{seq: 4, partial: `"d"`}) // the cap is 3
	b.answer("w-1", "echo", `{}`)
	res := b.result(1)
	got := b.published()
	if len(got) != 1 || got[0].Sequence != 3 || string(*got[0].Partial) != `"c"` {
		t.Fatalf("after the takeover published %+v", got)
	}
	if res.ProgressCount == nil || *res.ProgressCount != 3 {
		t.Fatalf("progress_count %v, want 3", res.ProgressCount)
	}
	if b.dropped("out_of_sequence") != 1 || b.dropped("capped") != 1 {
		t.Fatalf("dropped out_of_sequence %v, capped %v", b.dropped("out_of_sequence"), b.dropped("capped"))
	}
}
