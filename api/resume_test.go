package api_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/apitest"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// resumeHarness is a server whose results come from an in-memory log that
// also serves resume.
func resumeHarness(t *testing.T, partitions int, hopts ...harnessOpt) (*harness, *apitest.Log) {
	t.Helper()
	log := apitest.NewLog(partitions)
	h := newHarness(t, append(hopts, withOption(api.WithHistory(log)))...)
	log.Attach(h.results, true)
	return h, log
}

// tracker checks what one client sees over several connections: every id
// once, cursors that never go back.
type tracker struct {
	t      *testing.T
	seen   map[string]int
	cursor string
	last   api.Position
}

func newTracker(t *testing.T) *tracker { return &tracker{t: t, seen: map[string]int{}} }

// take records a message's cursor (every message must carry one) and, for
// a result, its intent id.
func (k *tracker) take(m serverMsg) {
	k.t.Helper()
	if m.Cursor == "" {
		k.t.Fatalf("%s message without a cursor: %+v", m.Type, m)
	}
	pos, err := api.ParseCursor(m.Cursor)
	if err != nil {
		k.t.Fatalf("cursor %q: %v", m.Cursor, err)
	}
	if k.last.Results != nil {
		for i := range pos.Results {
			if pos.Results[i] < k.last.Results[i] {
				k.t.Fatalf("cursor went back: %s after %s", m.Cursor, k.cursor)
			}
		}
	}
	k.last, k.cursor = pos, m.Cursor
	if m.Type == "result" {
		k.seen[m.Result.IntentID]++
		if k.seen[m.Result.IntentID] > 1 {
			k.t.Fatalf("result %s received twice", m.Result.IntentID)
		}
	}
}

func sessionResult(i int, session string) *schemas.IntentResult {
	return result(fmt.Sprintf("%s-%05d", session, i), "echo", session)
}

func resumeMsg(cursor string, subs ...string) string {
	return `{"resume":{"cursor":"` + cursor + `","subscriptions":[` + strings.Join(subs, ",") + `]}}`
}

// TestStreamResumeAfterDropNoGapNoDuplicate drops a client in the middle of
// a stream of a few thousand results (with unread messages in flight),
// writes more while it is away and more while it resumes, and checks that
// the client gets every result of its session exactly once.
func TestStreamResumeAfterDropNoGapNoDuplicate(t *testing.T) {
	for round := range 3 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			h, log := resumeHarness(t, 4, withCapacity(64), withConfig(func(c *api.Config) { c.SendQueue = 4096 }))
			const total = 3000
			k := newTracker(t)

			c := h.dial(nil)
			c.sendText(`{"subscribe":{"session_id":"s"}}`)
			k.take(c.expect("subscribed"))
			for i := range 1000 {
				log.AppendResult(sessionResult(i, "s"))
				log.AppendResult(sessionResult(i, "other"))
			}
			for len(k.seen) < 400+round*200 {
				k.take(c.expect("result"))
			}
			_ = c.conn.UnderlyingConn().Close() // dropped, with results unread
			for i := 1000; i < 2000; i++ {
				log.AppendResult(sessionResult(i, "s"))
			}

			c2 := h.dial(nil)
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // results keep coming while the client resumes
				defer wg.Done()
				for i := 2000; i < total; i++ {
					log.AppendResult(sessionResult(i, "s"))
					log.AppendResult(sessionResult(i, "other"))
				}
			}()
			c2.sendText(resumeMsg(k.cursor, `{"session_id":"s"}`))
			resumed := false
			for len(k.seen) < total || !resumed {
				m := c2.read()
				switch m.Type {
				case "result":
					if !strings.HasPrefix(m.Result.IntentID, "s-") {
						t.Fatalf("result of another session: %s", m.Result.IntentID)
					}
				case "resumed":
					resumed = true
				default:
					t.Fatalf("unexpected %q message %+v", m.Type, m)
				}
				k.take(m)
			}
			wg.Wait()
			c2.barrier() // and nothing more: no duplicate at the end
			if len(k.seen) != total {
				t.Fatalf("saw %d results, want %d", len(k.seen), total)
			}
		})
	}
}

// TestStreamResumeReplaysTimeoutsAndIntentTypes resumes with an intent-type
// and an intent-id subscription: timeout events and results both replay.
func TestStreamResumeReplaysTimeoutsAndIntentTypes(t *testing.T) {
	h, log := resumeHarness(t, 2)
	c := h.dial(nil)
	c.sendText(`{"subscribe":{"intent_type":"fraud_check"}}`)
	start := c.expect("subscribed").Cursor
	_ = c.conn.Close()

	log.AppendResult(result("e-1", "echo", ""))
	log.AppendTimeout(&schemas.IntentTimeout{
		IntentID: "f-1", IntentType: "fraud_check", Agent: "slow",
		Reason: schemas.TimeoutReason("deadline"), Fallback: schemas.FallbackKind("static"),
	})
	log.AppendResult(result("f-1", "fraud_check", ""))
	log.AppendTimeout(&schemas.IntentTimeout{
		IntentID: "e-2", IntentType: "echo", Agent: "echo",
		Reason: schemas.TimeoutReason("deadline"), Fallback: schemas.FallbackKind("none"),
	})
	log.AppendResult(result("e-2", "echo", ""))

	c2 := h.dial(nil)
	c2.sendText(resumeMsg(start, `{"intent_type":"fraud_check"}`, `{"intent_ids":["e-2"]}`))
	var got []string
	for {
		m := c2.read()
		if m.Type == "resumed" {
			if m.Replayed != 4 {
				t.Fatalf("resumed %+v, want replayed 4", m)
			}
			break
		}
		switch m.Type {
		case "timeout":
			got = append(got, "timeout "+m.Timeout.IntentID)
		case "result":
			got = append(got, "result "+m.Result.IntentID)
		}
	}
	// Partitions interleave, but within an intent the timeout comes first.
	idx := func(s string) int {
		for i, g := range got {
			if g == s {
				return i
			}
		}
		t.Fatalf("%q not replayed: %v", s, got)
		return -1
	}
	if len(got) != 4 || idx("timeout f-1") > idx("result f-1") || idx("timeout e-2") > idx("result e-2") {
		t.Fatalf("replayed %v", got)
	}
	// Live after the replay: the intent-id subscription ended with its result.
	log.AppendResult(result("f-2", "fraud_check", ""))
	if m := c2.expect("result"); m.Result.IntentID != "f-2" {
		t.Fatalf("live: %+v", m.Result)
	}
}

// TestStreamResumeCursorPastRetention: a cursor whose records were deleted
// gets cursor_expired with the earliest position; resuming from that works.
func TestStreamResumeCursorPastRetention(t *testing.T) {
	h, log := resumeHarness(t, 2)
	c := h.dial(nil)
	c.sendText(`{"subscribe":{"session_id":"s"}}`)
	start := c.expect("subscribed").Cursor
	for i := range 20 {
		log.AppendResult(sessionResult(i, "s"))
	}
	end := h.results.Position()
	mid := api.Position{Results: []int64{end.Results[0] / 2, end.Results[1] / 2}, Timeouts: []int64{0, 0}, Progress: []int64{0, 0}}
	log.DeleteBefore(mid)

	c2 := h.dial(nil)
	c2.sendText(resumeMsg(start, `{"session_id":"s"}`))
	m := c2.expect("error")
	if m.Error.Code != "cursor_expired" || m.Error.Earliest != mid.String() || m.Cursor != start {
		t.Fatalf("got %+v (cursor %q), want cursor_expired with earliest %s and the client's cursor", m.Error, m.Cursor, mid)
	}
	c2.sendText(resumeMsg(m.Error.Earliest, `{"session_id":"s"}`))
	n := 0
	for m := c2.read(); m.Type != "resumed"; m = c2.read() {
		n++
	}
	want := 20 - int(mid.Results[0]+mid.Results[1])
	if n != want {
		t.Fatalf("replayed %d from earliest, want %d", n, want)
	}
	// The resume is counted once it has handed over to live messages, a
	// moment after "resumed" went out.
	eventually(t, "switchboard_ws_resumes_total = 2 (one expired, one resumed)", func() bool {
		return metricValue(t, h.reg, "switchboard_ws_resumes_total") == 2
	})
	if got := metricValue(t, h.reg, "switchboard_ws_replayed_messages_total"); got != float64(want) {
		t.Fatalf("switchboard_ws_replayed_messages_total = %v, want %d", got, want)
	}
}

// TestStreamResumeOnAnInstanceBehind resumes, on an instance whose feed
// lags, with a cursor from an instance ahead: what the client had is not
// sent again and its cursors never go back.
func TestStreamResumeOnAnInstanceBehind(t *testing.T) {
	log := apitest.NewLog(3)
	a := newHarness(t, withOption(api.WithHistory(log)))
	b := newHarness(t, withOption(api.WithHistory(log)))
	log.Attach(a.results, true)
	lagging := log.Attach(b.results, false)

	k := newTracker(t)
	c := a.dial(nil)
	c.sendText(`{"subscribe":{"session_id":"s"}}`)
	k.take(c.expect("subscribed"))
	for i := range 30 {
		log.AppendResult(sessionResult(i, "s"))
	}
	for len(k.seen) < 30 {
		k.take(c.expect("result"))
	}
	_ = c.conn.Close()

	c2 := b.dial(nil)
	c2.sendText(resumeMsg(k.cursor, `{"session_id":"s"}`))
	m := c2.expect("resumed")
	if m.Replayed != 0 {
		t.Fatalf("replayed %d on the lagging instance", m.Replayed)
	}
	k.take(m)
	lagging.CatchUp() // b now reads what the client already had
	for i := 30; i < 40; i++ {
		log.AppendResult(sessionResult(i, "s"))
	}
	lagging.CatchUp()
	for len(k.seen) < 40 {
		k.take(c2.expect("result"))
	}
	c2.barrier()
}

// TestStreamErrorForEveryBadClientMessage: each bad message gets an error
// with a stable code, and the connection stays usable. Errors carry a
// cursor once the connection has a position (it subscribed or resumed),
// and none before: a client must not mistake the feed's position for its
// own.
func TestStreamErrorForEveryBadClientMessage(t *testing.T) {
	h, _ := resumeHarness(t, 2)
	c := h.dial(nil)
	good := h.results.Position().String()
	for _, tc := range []struct{ msg, code string }{
		{`not json`, "bad_message"},
		{`{"resume":{"cursor":"r0:0"},"subscribe":{"session_id":"s"}}`, "bad_message"},
		{`{"resume":{"cursor":"` + good + `"}}`, "bad_message"},
		{`{"resume":{"cursor":"` + good + `","subscriptions":[{}]}}`, "bad_message"},
		{`{"resume":{"cursor":"` + good + `","subscriptions":[{"session_id":"s"}],"x":1}}`, "bad_message"},
		{resumeMsg("", `{"session_id":"s"}`), "bad_cursor"},
		{resumeMsg("zz", `{"session_id":"s"}`), "bad_cursor"},
		{resumeMsg("r0:1,r0:2", `{"session_id":"s"}`), "bad_cursor"},
		{resumeMsg("r0:-1,r1:0,t0:0,t1:0", `{"session_id":"s"}`), "bad_cursor"},
		{resumeMsg("r0:0,r2:0,t0:0,t1:0", `{"session_id":"s"}`), "bad_cursor"},
		{resumeMsg("r0:0,t0:0", `{"session_id":"s"}`), "bad_cursor"}, // fewer partitions than the topics
	} {
		c.sendText(tc.msg)
		m := c.expect("error")
		if m.Error.Code != tc.code || m.Error.Message == "" || m.Cursor != "" {
			t.Fatalf("%s: got %+v cursor %q, want code %s", tc.msg, m.Error, m.Cursor, tc.code)
		}
	}
	if err := c.conn.WriteMessage(websocket.BinaryMessage, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if m := c.expect("error"); m.Error.Code != "bad_message" {
		t.Fatalf("binary: %+v", m.Error)
	}

	c.sendText(resumeMsg(good, `{"session_id":"s"}`))
	c.expect("resumed")
	c.sendText(resumeMsg(good, `{"session_id":"s"}`))
	if m := c.expect("error"); m.Error.Code != "bad_resume" || m.Cursor != good {
		t.Fatalf("second resume: %+v cursor %q, want bad_resume with cursor %s", m.Error, m.Cursor, good)
	}

	c2 := h.dial(nil)
	c2.subscribe(`{"session_id":"s"}`)
	c2.sendText(resumeMsg(good, `{"session_id":"s"}`))
	if m := c2.expect("error"); m.Error.Code != "bad_resume" {
		t.Fatalf("resume after subscribe: %+v", m.Error)
	}

	plain := newHarness(t) // no history
	c3 := plain.dial(nil)
	c3.sendText(resumeMsg(good, `{"session_id":"s"}`))
	if m := c3.expect("error"); m.Error.Code != "resume_unavailable" {
		t.Fatalf("resume without history: %+v", m.Error)
	}
}

// TestStreamTimeoutEvents: a timeout event reaches the subscribers of its
// intent id and intent type, before the result.
func TestStreamTimeoutEvents(t *testing.T) {
	h, log := resumeHarness(t, 2)
	byID, byType, bySession := h.dial(nil), h.dial(nil), h.dial(nil)
	byID.subscribe(`{"intent_ids":["f-1"]}`)
	byType.subscribe(`{"intent_type":"fraud_check"}`)
	bySession.subscribe(`{"session_id":"s"}`)
	log.AppendTimeout(&schemas.IntentTimeout{
		IntentID: "f-1", IntentType: "fraud_check", Agent: "slow",
		Deadline: 10, TimedOutAt: 11, ElapsedMs: 300, Reason: "deadline", Fallback: "static",
		SessionID: schemas.Ptr("s"),
	})
	log.AppendResult(result("f-1", "fraud_check", "s"))
	for _, c := range []*wsClient{byID, byType, bySession} {
		m := c.expect("timeout")
		if m.Timeout.IntentID != "f-1" || m.Timeout.Reason != "deadline" || m.Cursor == "" {
			t.Fatalf("timeout message %+v", m)
		}
		if m := c.expect("result"); m.Result.IntentID != "f-1" {
			t.Fatalf("result %+v", m.Result)
		}
	}
}
