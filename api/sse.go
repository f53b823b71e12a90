package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// Server-Sent Events: one intent's progress, then its result, as a browser
// EventSource or curl -N reads them.
//
//	GET  /v1/intents/{id}/events     follow an intent (Last-Event-ID honoured)
//	POST /v1/intents?stream=sse      submit an intent and follow it in one call
//
// The stream is text/event-stream:
//
//	event: accepted                  (POST only: the intent was published)
//	data: {"intent_id":"..."}
//
//	id: p3:1235
//	event: progress
//	data: {...IntentProgress...}
//
//	id: result
//	event: result
//	data: {...IntentResult...}
//
// and ends after the result. A progress event's id is where its record was
// read on the progress topic (p<partition>:<next offset>); a client that
// reconnects with it as Last-Event-ID is replayed, from the History, the
// progress after it, then follows live: nothing missed, nothing twice. A
// new GET without Last-Event-ID is replayed the intent's progress from
// where this instance saw it begin. Last-Event-ID "result" (the client has
// the result) is answered 204 No Content, which tells an EventSource to stop
// reconnecting; an intent already resolved is answered with its result at
// once. Tenant rules are those of results: another tenant's intent shows
// nothing. Comment lines (": keepalive") go out every PingPeriod. Events wait
// in a buffer of Config.SendQueue events and Config.SendQueueBytes bytes of
// progress records (estimated); a client that falls further behind gets an
// error event (code slow_consumer) and the stream ends: it reconnects with
// its Last-Event-ID. switchboard_api_watch_overflows_total counts them. A
// client that stops reading is cut once a write has waited Config.WriteWait
// (writewait.go). Streams count against
// Config.MaxConnectionsPerTenant like WebSocket connections.

// Error codes of the event stream.
const (
	codeBadLastEventID = "bad_last_event_id" // 400: Last-Event-ID is not one this server wrote
	codeSlowConsumer   = "slow_consumer"     // event: the client fell more than Config.SendQueue events or SendQueueBytes bytes behind
)

// sseResultID is the id of a stream's result event.
const sseResultID = "result"

// errResultSeen: Last-Event-ID says the client has the result.
var errResultSeen = errors.New("the client has the result")

// sseMetrics count the event streams.
type sseMetrics struct {
	streams prometheus.Gauge
	events  *prometheus.CounterVec
}

// newSSEMetrics registers the event streams' metrics, and the overflows
// of results' watches (event streams and MCP progress subscriptions alike),
// by the bound they passed.
func newSSEMetrics(reg prometheus.Registerer, results *Results) (*sseMetrics, error) {
	overflows := func(bound string, read func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "switchboard_api_watch_overflows_total",
			Help: "Event streams and MCP progress subscriptions dropped because their reader fell behind, by the bound passed: " +
				"events (http.websocket.send_queue; the MCP's 256) or bytes of progress (http.websocket.send_queue_bytes).",
			ConstLabels: prometheus.Labels{"bound": bound},
		}, read)
	}
	m := &sseMetrics{
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_sse_streams", Help: "Server-Sent Events streams open.",
		}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_sse_events_total", Help: "Server-Sent Events written, by event: progress, result, error.",
		}, []string{"event"}),
	}
	cs := []prometheus.Collector{
		m.streams, m.events,
		overflows("events", func() float64 { n, _ := results.WatchOverflows(); return float64(n) }),
		overflows("bytes", func() float64 { _, n := results.WatchOverflows(); return float64(n) }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// sseFrom is where a stream's replay starts: a partition of the progress
// topic and the next offset to read there.
type sseFrom struct {
	partition int32
	offset    int64
	ok        bool
}

// parseLastEventID reads a Last-Event-ID header: "" (none), "result", or
// p<partition>:<next offset>.
func parseLastEventID(v string) (sseFrom, error) {
	switch v {
	case "":
		return sseFrom{}, nil
	case sseResultID:
		return sseFrom{}, errResultSeen
	}
	rest, ok := strings.CutPrefix(v, "p")
	ps, os, ok2 := strings.Cut(rest, ":")
	partition, perr := strconv.ParseInt(ps, 10, 32)
	off, oerr := strconv.ParseInt(os, 10, 64)
	if !ok || !ok2 || perr != nil || oerr != nil || partition < 0 || off < 0 {
		return sseFrom{}, fmt.Errorf("Last-Event-ID %q is not one this server wrote (p<partition>:<offset> or result)", v)
	}
	return sseFrom{partition: int32(partition), offset: off, ok: true}, nil
}

// serveEvents serves GET /v1/intents/{id}/events.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if r.URL.RawPath != "" {
		if u, err := url.PathUnescape(id); err == nil {
			id = u
		}
	}
	if !intents.ValidID(id) {
		writeError(w, http.StatusBadRequest, codeInvalidParameter, fmt.Sprintf("%q is not an intent id", id), "id")
		return
	}
	from, err := parseLastEventID(r.Header.Get("Last-Event-ID"))
	switch {
	case errors.Is(err, errResultSeen):
		w.WriteHeader(http.StatusNoContent)
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, codeBadLastEventID, err.Error(), "Last-Event-ID")
		return
	}
	if s.stopCtx.Err() != nil {
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "shutting down", "")
		return
	}
	p := principalFrom(r.Context())
	if refuse := s.admitStream(p); refuse != nil {
		refuse(w)
		return
	}
	defer s.releaseStream(p)
	watch := s.results.Watch(tenantPtr(p), id, s.watchLimit())
	defer watch.Close()
	if !watch.resolved {
		// Resolved before this instance read it (elsewhere, or before it
		// started): the lookup store's result is the stream's one event.
		s.resolveStored(r.Context(), watch, lookupTenant(p), id)
	}
	if !from.ok {
		from.partition, from.offset, from.ok = watch.Start()
	}
	s.streamEvents(w, r, watch, id, from, nil)
}

// watchLimit bounds an event stream's watch: as a WebSocket client's send
// queue, Config.SendQueue events and Config.SendQueueBytes bytes.
func (s *Server) watchLimit() WatchLimit {
	return WatchLimit{Events: s.cfg.SendQueue, Bytes: s.cfg.SendQueueBytes}
}

// parseStream reads ?stream: absent, or "sse".
func parseStream(q url.Values) (bool, error) {
	if !q.Has("stream") {
		return false, nil
	}
	if v := q.Get("stream"); v != "sse" {
		return false, fmt.Errorf("stream=%q: the one stream is sse (text/event-stream)", v)
	}
	return true, nil
}

// eventWriter writes one event stream.
type eventWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf bytes.Buffer
	m   *sseMetrics
}

// event writes one event (id may be empty) and flushes it.
func (ew *eventWriter) event(name, id string, data []byte) error {
	ew.buf.Reset()
	if id != "" {
		ew.buf.WriteString("id: ")
		ew.buf.WriteString(id)
		ew.buf.WriteByte('\n')
	}
	ew.buf.WriteString("event: ")
	ew.buf.WriteString(name)
	ew.buf.WriteString("\ndata: ")
	ew.buf.Write(data) // compact JSON: one line
	ew.buf.WriteString("\n\n")
	if _, err := ew.w.Write(ew.buf.Bytes()); err != nil {
		return err
	}
	ew.m.events.WithLabelValues(name).Inc()
	return ew.rc.Flush()
}

// comment writes a comment line (ignored by clients) and flushes it.
func (ew *eventWriter) comment(text string) error {
	if _, err := ew.w.Write([]byte(": " + text + "\n\n")); err != nil {
		return err
	}
	return ew.rc.Flush()
}

func (ew *eventWriter) progress(p *schemas.IntentProgress, partition int32, offset int64, hasPos bool) error {
	b, err := json.Marshal(p)
	if err != nil {
		return nil // a partial that is not JSON cannot come from the codec; skip it
	}
	id := ""
	if hasPos {
		id = "p" + strconv.FormatInt(int64(partition), 10) + ":" + strconv.FormatInt(offset+1, 10)
	}
	return ew.event("progress", id, b)
}

func (ew *eventWriter) fail(code, message string) {
	b, _ := json.Marshal(errorBody{Code: code, Message: message})
	_ = ew.event("error", "", b)
}

// streamEvents answers with the event stream of watch's intent: the accepted
// event (POST), the progress replayed from from (if set) up to where the
// watch began, then the watch's events until the result, the client leaving
// or shutdown.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, watch *Watch, id string, from sseFrom, accepted *accepted) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	ew := &eventWriter{w: w, rc: http.NewResponseController(w), m: s.sse}
	s.sse.streams.Inc()
	defer s.sse.streams.Dec()
	var err error
	if accepted != nil {
		b, _ := json.Marshal(accepted)
		err = ew.event("accepted", "", b)
	} else {
		err = ew.comment("switchboard " + id)
	}
	if err != nil {
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.stopCtx, cancel)
	defer stop()
	if from.ok && !watch.resolved { // a resolved intent is answered with its result
		if !s.replayEvents(ctx, ew, watch, id, from) {
			return
		}
	}
	keepalive := s.clock.NewTicker(s.cfg.PingPeriod)
	defer keepalive.Stop()
	for {
		select {
		case ev, ok := <-watch.Events():
			switch {
			case !ok:
				if errors.Is(watch.Err(), ErrWatchOverflow) {
					ew.fail(codeSlowConsumer, fmt.Sprintf("more than %d events or %d bytes of progress waited for this client; reconnect with Last-Event-ID", s.cfg.SendQueue, s.cfg.SendQueueBytes))
				}
				return
			case ev.Result != nil:
				b, merr := json.Marshal(ev.Result)
				if merr == nil {
					_ = ew.event("result", sseResultID, b)
				}
				return
			case ev.Progress != nil:
				err = ew.progress(ev.Progress, ev.Partition, ev.Offset, ev.hasPos)
			}
		case <-keepalive.Chan():
			err = ew.comment("keepalive")
		case <-ctx.Done():
			if s.stopCtx.Err() != nil {
				ew.fail(codeUnavailable, "the server is shutting down; reconnect with Last-Event-ID")
			}
			return
		}
		if err != nil {
			return
		}
	}
}

// replayEvents writes the intent's progress read on from's partition from
// from's offset up to where the watch began. It reports false if the stream
// must end (the client left, or the replay failed and the client was told).
func (s *Server) replayEvents(ctx context.Context, ew *eventWriter, watch *Watch, id string, from sseFrom) bool {
	live := watch.Live()
	if s.history == nil || int(from.partition) >= len(live) || from.offset >= live[from.partition] {
		return true // nothing to replay (or nothing to replay it from)
	}
	if !s.admitReplay(watch.tenant) {
		ew.fail(codeResumeUnavailable, "too many replays on this server; reconnect shortly")
		return false
	}
	defer s.releaseReplay(watch.tenant)
	start, end := s.results.Position(), s.results.Position()
	start.Progress = append([]int64(nil), live...)
	end.Progress = append([]int64(nil), live...)
	start.Results, start.Timeouts = end.Results, end.Timeouts // only the progress topic
	start.Progress[from.partition] = from.offset
	err := s.history.Replay(ctx, start, end, func(rec Record) error {
		p := rec.Progress
		if p == nil || p.IntentID != id || !watch.admitsProgress(p) {
			return nil
		}
		return ew.progress(p, rec.Partition, rec.Offset, true)
	})
	switch {
	case err == nil:
		return true
	case errors.Is(err, ErrCursorExpired):
		ew.fail(codeCursorExpired, "the progress before this point is no longer held; what follows is live")
		return true
	case ctx.Err() != nil:
		return false
	default:
		s.log.Warn("events: replay failed", "intent_id", id, "error", err)
		ew.fail(codeUnavailable, "replaying the intent's progress failed; reconnect with Last-Event-ID")
		return false
	}
}
