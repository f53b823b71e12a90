package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/apitest"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// chunk is progress record seq of an intent, as the router writes it.
func chunk(id, tenant string, seq int64) *schemas.IntentProgress {
	p := &schemas.IntentProgress{
		IntentID: id, IntentType: "write", Agent: "writer", Sequence: seq, Attempt: 1,
		Partial: schemas.Ptr(schemas.JSON(fmt.Sprintf(`{"text":"w%d "}`, seq))), ReceivedAt: seq,
	}
	if tenant != "" {
		p.Tenant = schemas.Ptr(tenant)
	}
	return p
}

// streamedResult is the result of an intent that published n progress
// records.
func streamedResult(id, tenant string, n int64) *schemas.IntentResult {
	r := result(id, "write", "")
	if tenant != "" {
		r.Tenant = schemas.Ptr(tenant)
	}
	if n > 0 {
		r.ProgressCount = schemas.Ptr(n)
	}
	return r
}

// expectProgress reads progress messages from..to of id, in order, each
// with a cursor that has a progress part.
func (c *wsClient) expectProgress(id string, from, to int64) []serverMsg {
	c.t.Helper()
	var out []serverMsg
	for seq := from; seq <= to; seq++ {
		m := c.expect("progress")
		if m.Progress.IntentID != id || m.Progress.Sequence != seq {
			c.t.Fatalf("progress %s/%d, want %s/%d", m.Progress.IntentID, m.Progress.Sequence, id, seq)
		}
		if pos, err := api.ParseCursor(m.Cursor); err != nil || len(pos.Progress) == 0 {
			c.t.Fatalf("progress message cursor %q (%v): no progress part", m.Cursor, err)
		}
		out = append(out, m)
	}
	return out
}

// A subscription with progress: true gets the intent's progress, in order,
// then its result; one without gets the result only.
func TestStreamProgressBeforeTheResult(t *testing.T) {
	h, log := resumeHarness(t, 2)
	c := h.dial(nil)
	c.subscribe(`{"intent_ids":["w-1"],"progress":true}`)
	plain := h.dial(nil)
	plain.subscribe(`{"intent_ids":["w-1"]}`)
	byType := h.dial(nil)
	byType.subscribe(`{"intent_type":"write","progress":true}`)
	for seq := int64(1); seq <= 5; seq++ {
		log.AppendProgress(chunk("w-1", "", seq))
	}
	log.AppendResult(streamedResult("w-1", "", 5))
	for _, cl := range []*wsClient{c, byType} {
		cl.expectProgress("w-1", 1, 5)
		if m := cl.expect("result"); m.Result.IntentID != "w-1" || *m.Result.ProgressCount != 5 {
			t.Fatalf("result %+v", m.Result)
		}
	}
	if m := plain.expect("result"); m.Result.IntentID != "w-1" {
		t.Fatalf("result %+v", m.Result)
	}
	plain.barrier()
	// The intent-id subscription ended with the result, progress half and
	// all: progress of the id after it (there is none from the router)
	// is not sent.
	log.AppendProgress(chunk("w-1", "", 6))
	c.barrier()
}

// Read in another order than written (a fetch of the results partition
// returns first), the feed still hands over the progress first: it holds
// the result, and the results behind it in its partition.
func TestFeedHoldsAResultUntilItsProgress(t *testing.T) {
	log := apitest.NewLog(1)
	h := newHarness(t, withOption(api.WithHistory(log)))
	feed := log.Attach(h.results, false) // manual: results, then progress
	c := h.dial(nil)
	c.subscribe(`{"intent_type":"write","progress":true}`)
	for seq := int64(1); seq <= 3; seq++ {
		log.AppendProgress(chunk("w-1", "", seq))
	}
	log.AppendResult(streamedResult("w-1", "", 3))
	log.AppendResult(streamedResult("w-2", "", 0)) // behind w-1's in the partition
	feed.CatchUp()
	c.expectProgress("w-1", 1, 3)
	if m := c.expect("result"); m.Result.IntentID != "w-1" {
		t.Fatalf("first result %s", m.Result.IntentID)
	}
	if m := c.expect("result"); m.Result.IntentID != "w-2" {
		t.Fatalf("second result %s", m.Result.IntentID)
	}
	if got := metricValue(t, h.reg, "switchboard_api_results_held_total"); got != 0 {
		t.Fatalf("the test harness's feed registered metrics: %v", got) // (it has no registerer)
	}
}

// A result whose progress never comes is released after the hold, counted;
// a repeated progress record (an at-least-once router) moves the position
// but is not sent again.
func TestFeedReleasesAfterTheHoldAndDropsRepeats(t *testing.T) {
	clock := clockwork.NewFakeClock()
	reg := prometheus.NewRegistry()
	r := api.NewResults(0)
	f, err := api.NewFeed(r, api.FeedConfig{Clock: clock, Hold: time.Second, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	f.Begin(api.Position{Results: []int64{0}, Timeouts: []int64{0}, Progress: []int64{0}})
	w := r.Watch(nil, "w-1", api.WatchLimit{Events: 16})
	defer w.Close()
	f.Progress(0, 0, chunk("w-1", "", 1))
	f.Progress(0, 1, chunk("w-1", "", 1)) // a repeat
	f.Result(0, 0, streamedResult("w-1", "", 3))
	f.Result(0, 1, streamedResult("w-2", "", 0))
	if _, ok := r.Get("", "w-1"); ok {
		t.Fatal("released a result whose progress has not all come")
	}
	if _, ok := r.Get("", "w-2"); ok {
		t.Fatal("released a result behind a held one")
	}
	if pos := r.Position(); pos.Progress[0] != 2 || pos.Results[0] != 0 {
		t.Fatalf("position %v: want progress past the repeat, results before the held one", pos)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	eventually(t, "the held results released", func() bool {
		_, ok1 := r.Get("", "w-1")
		_, ok2 := r.Get("", "w-2")
		return ok1 && ok2
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := metricValue(t, reg, "switchboard_api_results_released_incomplete_total"); got != 1 {
		t.Fatalf("released incomplete %v, want 1", got)
	}
	var seqs []int64
	for ev := range w.Events() {
		if ev.Progress != nil {
			seqs = append(seqs, ev.Progress.Sequence)
		}
	}
	if len(seqs) != 1 || w.Err() != nil {
		t.Fatalf("watch saw progress %v (err %v), want [1]: the repeat is not sent", seqs, w.Err())
	}
}

// A client dropped in the middle of an intent's progress resumes from its
// cursor: the rest of the progress, then the result, nothing twice.
func TestStreamProgressResumesMidStream(t *testing.T) {
	h, log := resumeHarness(t, 3)
	c := h.dial(nil)
	c.subscribe(`{"intent_ids":["w-1"],"progress":true}`)
	for seq := int64(1); seq <= 10; seq++ {
		log.AppendProgress(chunk("w-1", "", seq))
	}
	got := c.expectProgress("w-1", 1, 4)
	cursor := got[len(got)-1].Cursor
	_ = c.conn.Close() // 5..10 unread
	for seq := int64(11); seq <= 20; seq++ {
		log.AppendProgress(chunk("w-1", "", seq))
	}
	log.AppendResult(streamedResult("w-1", "", 20))

	c2 := h.dial(nil)
	c2.sendText(resumeMsg(cursor, `{"intent_ids":["w-1"],"progress":true}`))
	c2.expectProgress("w-1", 5, 20)
	if m := c2.expect("result"); m.Result.IntentID != "w-1" {
		t.Fatalf("result %+v", m.Result)
	}
	if m := c2.expect("resumed"); m.Replayed != 17 {
		t.Fatalf("replayed %d, want 17", m.Replayed)
	}
	c2.barrier()
}

// A cursor from before the progress stream (no p parts) still resumes:
// results from it, progress from now on.
func TestStreamResumeWithACursorWithoutProgress(t *testing.T) {
	h, log := resumeHarness(t, 2)
	c := h.dial(nil)
	c.sendText(`{"subscribe":{"session_id":"s"}}`)
	cursor := c.expect("subscribed").Cursor
	old := cursor[:strings.Index(cursor, ",p0:")]
	_ = c.conn.Close()
	log.AppendResult(sessionResult(1, "s"))
	c2 := h.dial(nil)
	c2.sendText(resumeMsg(old, `{"session_id":"s"}`))
	if m := c2.expect("result"); m.Result.IntentID != sessionResult(1, "s").IntentID {
		t.Fatalf("result %+v", m.Result)
	}
	if m := c2.expect("resumed"); !strings.Contains(m.Cursor, ",p0:") {
		t.Fatalf("resumed with cursor %q: no progress part", m.Cursor)
	}
}

// Progress goes to its tenant's subscribers and watches only; progress of
// no tenant to none of them.
func TestProgressIsTenantScoped(t *testing.T) {
	h, log := resumeHarness(t, 1, withAuth(nil))
	acme, globex := h.dial(bearer(keyAcme)), h.dial(bearer(keyGlobex))
	acme.subscribe(`{"intent_type":"write","progress":true}`)
	globex.subscribe(`{"intent_type":"write","progress":true}`)
	wAcme, wGlobex := h.results.Watch(schemas.Ptr("acme"), "w-1", api.WatchLimit{Events: 8}), h.results.Watch(schemas.Ptr("globex"), "w-1", api.WatchLimit{Events: 8})
	defer wAcme.Close()
	defer wGlobex.Close()
	log.AppendProgress(chunk("w-1", "acme", 1))
	log.AppendProgress(chunk("w-x", "", 1))
	log.AppendResult(streamedResult("w-1", "acme", 1))
	acme.expectProgress("w-1", 1, 1)
	acme.expect("result")
	globex.barrier()
	if ev := <-wAcme.Events(); ev.Progress == nil || ev.Progress.IntentID != "w-1" {
		t.Fatalf("acme's watch: %+v", ev)
	}
	if ev := <-wAcme.Events(); ev.Result == nil {
		t.Fatalf("acme's watch, second event: %+v", ev)
	}
	select {
	case ev := <-wGlobex.Events():
		t.Fatalf("globex's watch got acme's %+v", ev)
	default:
	}
}

// A watch: progress in order, the result, then the channel closes; a full
// buffer drops the watch; a watch of a resolved intent has its result.
func TestWatch(t *testing.T) {
	log := apitest.NewLog(1)
	r := api.NewResults(0)
	log.Attach(r, true)
	w := r.Watch(nil, "w-1", api.WatchLimit{Events: 8})
	slow := r.Watch(nil, "w-1", api.WatchLimit{Events: 2})
	for seq := int64(1); seq <= 3; seq++ {
		log.AppendProgress(chunk("w-1", "", seq))
	}
	log.AppendResult(streamedResult("w-1", "", 3))
	var got []string
	for ev := range w.Events() {
		switch {
		case ev.Progress != nil:
			if !ev.HasPosition() || ev.Offset != ev.Progress.Sequence-1 {
				t.Fatalf("progress %d at %d/%d", ev.Progress.Sequence, ev.Partition, ev.Offset)
			}
			got = append(got, fmt.Sprint(ev.Progress.Sequence))
		case ev.Result != nil:
			got = append(got, "result")
		}
	}
	if strings.Join(got, ",") != "1,2,3,result" || w.Err() != nil {
		t.Fatalf("watch saw %v (err %v)", got, w.Err())
	}
	n := 0
	for range slow.Events() {
		n++
	}
	if n != 2 || slow.Err() != api.ErrWatchOverflow {
		t.Fatalf("slow watch: %d events, err %v; want 2 and ErrWatchOverflow", n, slow.Err())
	}
	done := r.Watch(nil, "w-1", api.WatchLimit{Events: 1})
	ev, ok := <-done.Events()
	if !ok || ev.Result == nil || ev.Result.IntentID != "w-1" {
		t.Fatalf("watch of a resolved intent: %+v", ev)
	}
	if _, ok := <-done.Events(); ok {
		t.Fatal("more after the result")
	}
	w.Close() // idempotent after the end
	slow.Close()
}

// bigChunk is a progress record of w-1 with a partial of n bytes.
func bigChunk(seq int64, n int) *schemas.IntentProgress {
	p := chunk("w-1", "", seq)
	p.Partial = schemas.Ptr(schemas.JSON(`"` + strings.Repeat("x", n) + `"`))
	return p
}

// A watch holds at most its limit's Bytes of progress its reader has not
// taken: one record of any size when none waits; taking records makes room
// again; one more past the bound drops the watch (ErrWatchOverflow),
// counted by the bound it passed. The result counts against Events only.
func TestWatchBoundsBytes(t *testing.T) {
	log := apitest.NewLog(1)
	r := api.NewResults(0)
	log.Attach(r, true)
	limit := api.WatchLimit{Events: 100, Bytes: 25_000} // two records of 10,000 bytes and more
	w := r.Watch(nil, "w-1", limit)
	tiny := r.Watch(nil, "w-1", api.WatchLimit{Events: 100, Bytes: 1})
	defer w.Close()
	defer tiny.Close()
	log.AppendProgress(bigChunk(1, 10_000)) // tiny takes it: nothing of it waits
	log.AppendProgress(bigChunk(2, 10_000))
	if tiny.Err() != api.ErrWatchOverflow {
		t.Fatalf("a watch bounded at 1 byte holding a record: err %v", tiny.Err())
	}
	for seq := int64(1); seq <= 2; seq++ {
		if ev := <-w.Events(); ev.Progress == nil || ev.Progress.Sequence != seq {
			t.Fatalf("event %d: %+v", seq, ev)
		}
	}
	log.AppendProgress(bigChunk(3, 10_000))
	log.AppendProgress(bigChunk(4, 10_000)) // room again: 1 and 2 were taken
	if w.Err() != nil {
		t.Fatalf("two records waiting within the bound: %v", w.Err())
	}
	log.AppendProgress(bigChunk(5, 10_000))
	var seqs []int64
	for ev := range w.Events() {
		seqs = append(seqs, ev.Progress.Sequence)
	}
	if fmt.Sprint(seqs) != "[3 4]" || w.Err() != api.ErrWatchOverflow {
		t.Fatalf("after a third record waiting: %v, err %v", seqs, w.Err())
	}

	full := r.Watch(nil, "w-2", limit)
	defer full.Close()
	for seq := int64(1); seq <= 2; seq++ {
		p := bigChunk(seq, 10_000)
		p.IntentID = "w-2"
		log.AppendProgress(p)
	}
	log.AppendResult(streamedResult("w-2", "", 2))
	n := 0
	for ev := range full.Events() {
		n++
		if n == 3 && ev.Result == nil {
			t.Fatalf("third event %+v, want the result", ev)
		}
	}
	if n != 3 || full.Err() != nil {
		t.Fatalf("a watch full in bytes: %d events, err %v; want 2 records and the result", n, full.Err())
	}
	if events, bytes := r.WatchOverflows(); events != 0 || bytes != 2 {
		t.Fatalf("overflows: %d of events, %d of bytes; want 0 and 2", events, bytes)
	}
}
