package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// sseEvent is one event of a text/event-stream; comments come as event
// "comment" with the text as data.
type sseEvent struct {
	id, event, data string
}

type sseClient struct {
	t      *testing.T
	resp   *http.Response
	events chan sseEvent // closed at the end of the stream
	cancel context.CancelFunc
}

// sse opens an event stream: GET or POST path with the headers hdr.
func (h *harness) sse(method, path, body string, hdr http.Header) *sseClient {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.ts.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := h.ts.Client().Do(req)
	if err != nil {
		cancel()
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	c := &sseClient{t: h.t, resp: resp, events: make(chan sseEvent, 1024), cancel: cancel}
	h.t.Cleanup(func() { cancel(); _ = resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		close(c.events)
		return c
	}
	go func() {
		defer close(c.events)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.event != "" {
					c.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ": "):
				c.events <- sseEvent{event: "comment", data: line[2:]}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
	}()
	return c
}

// next returns the next event that is not a comment.
func (c *sseClient) next() sseEvent {
	c.t.Helper()
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				c.t.Fatal("the stream ended")
			}
			if ev.event != "comment" {
				return ev
			}
		case <-time.After(testTimeout):
			c.t.Fatal("no event")
		}
	}
}

// expectProgress reads progress events from..to of id, in order, and
// returns the id of the last.
func (c *sseClient) expectProgress(id string, from, to int64) string {
	c.t.Helper()
	last := ""
	for seq := from; seq <= to; seq++ {
		ev := c.next()
		var p schemas.IntentProgress
		if ev.event != "progress" || json.Unmarshal([]byte(ev.data), &p) != nil || p.IntentID != id || p.Sequence != seq {
			c.t.Fatalf("event %+v, want progress %s/%d", ev, id, seq)
		}
		if !strings.HasPrefix(ev.id, "p") {
			c.t.Fatalf("progress event id %q", ev.id)
		}
		last = ev.id
	}
	return last
}

// expectResult reads the result event, then the end of the stream.
func (c *sseClient) expectResult(id string) {
	c.t.Helper()
	ev := c.next()
	var res schemas.IntentResult
	if ev.event != "result" || ev.id != "result" || json.Unmarshal([]byte(ev.data), &res) != nil || res.IntentID != id {
		c.t.Fatalf("event %+v, want the result of %s", ev, id)
	}
	for ev := range c.events {
		if ev.event != "comment" {
			c.t.Fatalf("after the result: %+v", ev)
		}
	}
}

// waitWatching waits until the server holds n watches of id's progress:
// the stream is registered, so what is appended now reaches it live.
func waitStreams(t *testing.T, h *harness, n float64) {
	t.Helper()
	eventually(t, "the event streams open", func() bool {
		return metricValue(t, h.reg, "switchboard_sse_streams") == n
	})
}

func TestEventsStreamProgressThenResult(t *testing.T) {
	h, log := resumeHarness(t, 2)
	c := h.sse("GET", "/v1/intents/w-1/events", "", nil)
	if ct := c.resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	waitStreams(t, h, 1)
	for seq := int64(1); seq <= 3; seq++ {
		log.AppendProgress(chunk("w-1", "", seq))
	}
	log.AppendResult(streamedResult("w-1", "", 3))
	if last := c.expectProgress("w-1", 1, 3); last != fmt.Sprintf("p%d:3", log.PartitionOf("w-1")) {
		t.Fatalf("last progress id %q", last)
	}
	c.expectResult("w-1")
	waitStreams(t, h, 0)
}

// Reconnecting with Last-Event-ID replays the progress after it, then goes
// live; a new stream without one replays the intent's progress from where
// this instance saw it begin.
func TestEventsResumeFromLastEventID(t *testing.T) {
	h, log := resumeHarness(t, 3)
	for seq := int64(1); seq <= 5; seq++ {
		log.AppendProgress(chunk("w-1", "", seq))
		log.AppendProgress(chunk("other", "", seq))
	}
	first := h.sse("GET", "/v1/intents/w-1/events", "", nil)
	first.expectProgress("w-1", 1, 5) // replayed from the start
	id3 := ""
	{
		again := h.sse("GET", "/v1/intents/w-1/events", "", nil)
		again.expectProgress("w-1", 1, 2)
		id3 = again.expectProgress("w-1", 3, 3)
		again.cancel()
	}
	resumed := h.sse("GET", "/v1/intents/w-1/events", "", http.Header{"Last-Event-ID": {id3}})
	resumed.expectProgress("w-1", 4, 5)
	waitStreams(t, h, 2)
	log.AppendProgress(chunk("w-1", "", 6))
	log.AppendResult(streamedResult("w-1", "", 6))
	resumed.expectProgress("w-1", 6, 6)
	resumed.expectResult("w-1")
	first.expectProgress("w-1", 6, 6)
	first.expectResult("w-1")

	// The client that has the result gets 204: an EventSource stops there.
	done := h.sse("GET", "/v1/intents/w-1/events", "", http.Header{"Last-Event-ID": {"result"}})
	if done.resp.StatusCode != http.StatusNoContent {
		t.Fatalf("Last-Event-ID result: %d", done.resp.StatusCode)
	}
	// A resolved intent is answered with its result at once.
	h.sse("GET", "/v1/intents/w-1/events", "", nil).expectResult("w-1")
	bad := h.sse("GET", "/v1/intents/w-1/events", "", http.Header{"Last-Event-ID": {"r0:1"}})
	if bad.resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad Last-Event-ID: %d", bad.resp.StatusCode)
	}
}

// POST /v1/intents?stream=sse publishes and streams in one call.
func TestSubmitStreamSSE(t *testing.T) {
	h, log := resumeHarness(t, 2)
	h.pub.Func = func(_ context.Context, req *schemas.IntentRequest) error {
		h.bg.Add(1)
		go func() { // the router, a moment later
			defer h.bg.Done()
			for seq := int64(1); seq <= 4; seq++ {
				log.AppendProgress(chunk(req.IntentID, "", seq))
			}
			log.AppendResult(streamedResult(req.IntentID, "", 4))
		}()
		return nil
	}
	c := h.sse("POST", "/v1/intents?stream=sse", `{"intent_id":"w-9","intent_type":"write","payload":{"words":4}}`, nil)
	ev := c.next()
	if ev.event != "accepted" || !strings.Contains(ev.data, `"intent_id":"w-9"`) {
		t.Fatalf("first event %+v", ev)
	}
	c.expectProgress("w-9", 1, 4)
	c.expectResult("w-9")
	if c.resp.Header.Get("Location") != "/v1/intents/w-9" {
		t.Fatalf("Location %q", c.resp.Header.Get("Location"))
	}
	resp, body := h.do("POST", "/v1/intents?stream=sse&wait=1s", `{"intent_type":"write","payload":{}}`)
	wantError(t, resp, body, http.StatusBadRequest, "invalid_parameter", "stream")
	resp, body = h.do("POST", "/v1/intents?stream=ws", `{"intent_type":"write","payload":{}}`)
	wantError(t, resp, body, http.StatusBadRequest, "invalid_parameter", "stream")
}

// Comment lines keep an idle stream open, every PingPeriod of the injected
// clock.
func TestEventsKeepalive(t *testing.T) {
	h, _ := resumeHarness(t, 1, withConfig(func(c *api.Config) { c.PingPeriod = time.Second; c.PongWait = 2 * time.Second }))
	c := h.sse("GET", "/v1/intents/w-1/events", "", nil)
	if ev := <-c.events; ev.event != "comment" || ev.data != "switchboard w-1" {
		t.Fatalf("first line %+v", ev)
	}
	// Not BlockUntil(1) then one Advance: the first line's write has a
	// timer of its own (the write wait) until it returns, which BlockUntil
	// may count before the keepalive ticker exists.
	var ev sseEvent
	eventually(t, "a line after a PingPeriod", func() bool {
		select {
		case ev = <-c.events:
			return true
		default:
			h.clock.Advance(time.Second)
			return false
		}
	})
	if ev.event != "comment" || ev.data != "keepalive" {
		t.Fatalf("got %+v, want a keepalive comment", ev)
	}
}

// Another tenant's intent shows nothing on an event stream.
func TestEventsTenantScoped(t *testing.T) {
	h, log := resumeHarness(t, 1, withAuth(nil))
	theirs := h.sse("GET", "/v1/intents/w-1/events", "", bearer(keyGlobex))
	mine := h.sse("GET", "/v1/intents/w-1/events", "", bearer(keyAcme))
	waitStreams(t, h, 2)
	log.AppendProgress(chunk("w-1", "acme", 1))
	log.AppendResult(streamedResult("w-1", "acme", 1))
	mine.expectProgress("w-1", 1, 1)
	mine.expectResult("w-1")
	theirs.cancel()
	for ev := range theirs.events {
		if ev.event != "comment" {
			t.Fatalf("globex's stream got %+v", ev)
		}
	}
}

// A POST ?stream=sse over the tenant's stream cap is refused (429) before
// publishing, and its Idempotency-Key stays free: the retry publishes.
func TestSubmitStreamOverTheCapPublishesNothing(t *testing.T) {
	h, _ := resumeHarness(t, 1, withAuth(nil), withConfig(func(c *api.Config) { c.MaxConnectionsPerTenant = 1 }))
	held := h.sse("GET", "/v1/intents/other/events", "", bearer(keyAcme))
	waitStreams(t, h, 1)
	hdr := bearer(keyAcme)
	hdr.Set("Idempotency-Key", "k-1")
	resp, body := h.doWith("POST", "/v1/intents?stream=sse", `{"intent_type":"write","payload":{}}`, hdr)
	wantRefusal(t, resp, body, http.StatusTooManyRequests, "too_many_connections")
	if n := len(h.pub.Requests()); n != 0 {
		t.Fatalf("published %d requests over the cap", n)
	}
	held.cancel()
	waitStreams(t, h, 0)
	if resp, body := h.doWith("POST", "/v1/intents", `{"intent_type":"write","payload":{}}`, hdr); resp.StatusCode != http.StatusAccepted || resp.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry: %d %s (replayed %q)", resp.StatusCode, body, resp.Header.Get("Idempotent-Replayed"))
	}
	if n := len(h.pub.Requests()); n != 1 {
		t.Fatalf("the retry published %d requests, want 1", n)
	}
}

// An event stream whose client stops reading holds at most
// Config.SendQueueBytes of progress for it (here far fewer records than
// Config.SendQueue): past that it is dropped, counted, and the client
// reads an error event (slow_consumer) instead of the rest and the result.
func TestEventsStreamBoundedInBytes(t *testing.T) {
	h, log := resumeHarness(t, 1, withSendBuffers(4096), withConfig(func(c *api.Config) { c.SendQueueBytes = 256 << 10 }))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.ts.URL+"/v1/intents/w-1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	waitStreams(t, h, 1)
	const records = 200 // of 64 KiB: 12.5 MiB, past any socket's buffers
	for seq := int64(1); seq <= records; seq++ {
		log.AppendProgress(bigChunk(seq, 64<<10))
	}
	log.AppendResult(streamedResult("w-1", "", records))
	eventually(t, "the stream dropped", func() bool {
		return metricValue(t, h.reg, "switchboard_api_watch_overflows_total") == 1
	})
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	got := string(body)
	if n := strings.Count(got, "event: progress\n"); n >= records || !strings.Contains(got, "event: error\n") ||
		!strings.Contains(got, `"code":"slow_consumer"`) || strings.Contains(got, "event: result\n") {
		t.Fatalf("%d progress events, then %q", n, got[max(len(got)-300, 0):])
	}
	if events, bytes := h.results.WatchOverflows(); events != 0 || bytes != 1 {
		t.Fatalf("overflows: %d of events, %d of bytes; want 0 and 1", events, bytes)
	}
}
