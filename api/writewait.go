package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
)

// Answers that can be long, or long-lived, are written against the clock,
// like request bodies are read (body.go): event streams (GET
// /v1/intents/{id}/events, POST /v1/intents?stream=sse), every answer of
// POST /v1/intents (a ?wait answer carries a result of up to the payload
// limit), GET /v1/intents/{id} and the MCP endpoint (its POSTs answered as
// event streams, its GET stream; the SDK writes to the writer it is handed).
//
// Each write and flush has Config.WriteWait (http.websocket.write_wait, the
// WebSocket's bound on one write) to be taken by the client's socket. A
// timer on the injected clock runs while the write is under way; when it
// fires, the connection's write deadline is set in the past, which ends the
// blocked write at once. The write fails (errWriteTimeout), so do all later
// ones, and the request's context ends; net/http closes the connection
// once the handler returns, and the handler's slots (stream, wait) come back
// as it does. switchboard_api_write_timeouts_total counts them by route.
//
// A client that stops reading would otherwise hold its handler in a write
// until TCP gives up, many minutes later.

// errWriteTimeout: the client did not take a write within Config.WriteWait.
var errWriteTimeout = errors.New("api: the client did not take a write within write_wait")

// bufferBeforeChunking is how much of an answer net/http holds before it
// decides between Content-Length and chunked encoding (its
// bufferBeforeChunkingSize).
const bufferBeforeChunking = 2048

// boundedWriter is a ResponseWriter whose writes and flushes end after
// Config.WriteWait. It keeps Flush (http.Flusher, and FlushError for
// http.ResponseController) and Unwrap, so what is beneath (deadlines,
// Hijack) stays reachable.
type boundedWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController // of the writer beneath
	clock   clockwork.Clock
	wait    time.Duration
	expired func() // counts a timeout (once)

	mu       sync.Mutex
	busy     bool // a write or flush is under way
	timedOut bool
	flushed  bool  // the answer went out in part: its encoding is settled
	written  int64 // bytes handed to Write
}

var (
	_ http.Flusher                    = (*boundedWriter)(nil)
	_ interface{ FlushError() error } = (*boundedWriter)(nil)
)

// bound runs one write or flush under the timer.
func (b *boundedWriter) bound(op func() error) error {
	b.mu.Lock()
	if b.timedOut {
		b.mu.Unlock()
		return errWriteTimeout
	}
	b.busy = true
	b.mu.Unlock()
	t := b.clock.AfterFunc(b.wait, b.expire)
	err := op()
	t.Stop()
	b.mu.Lock()
	b.busy = false
	timedOut := b.timedOut
	b.mu.Unlock()
	if err != nil && timedOut {
		err = fmt.Errorf("%w: %w", errWriteTimeout, err)
	}
	return err
}

// expire is the timer's: it ends the write in progress, and every later
// one. A timer that fires as its write returns does nothing: the deadline
// is set under the lock the write's end takes, so never on a connection
// whose writes are done (a keep-alive connection's next answer).
func (b *boundedWriter) expire() {
	b.mu.Lock()
	if !b.busy || b.timedOut {
		b.mu.Unlock()
		return
	}
	b.timedOut = true
	b.expired() // counted before the write it ends returns
	_ = b.rc.SetWriteDeadline(aLongTimeAgo)
	b.mu.Unlock()
}

func (b *boundedWriter) hasTimedOut() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.timedOut
}

func (b *boundedWriter) Write(p []byte) (int, error) {
	var n int
	err := b.bound(func() error {
		var err error
		n, err = b.ResponseWriter.Write(p)
		return err
	})
	b.mu.Lock()
	b.written += int64(n)
	b.mu.Unlock()
	return n, err
}

// FlushError is http.ResponseController's Flush.
func (b *boundedWriter) FlushError() error {
	b.mu.Lock()
	b.flushed = true
	b.mu.Unlock()
	return b.bound(b.rc.Flush)
}

// Flush implements http.Flusher.
func (b *boundedWriter) Flush() { _ = b.FlushError() }

// Unwrap lets http.ResponseController reach the writer beneath.
func (b *boundedWriter) Unwrap() http.ResponseWriter { return b.ResponseWriter }

// finish writes out, under the timer, what net/http still holds of an
// answer whose encoding is settled, so that the write net/http makes after
// the handler returns is not the one a client that stopped reading blocks.
// A short answer never flushed stays in net/http's buffer (at most
// bufferBeforeChunking bytes and its headers), to keep its Content-Length.
func (b *boundedWriter) finish() {
	b.mu.Lock()
	settled := b.flushed || b.written > bufferBeforeChunking
	b.mu.Unlock()
	if settled {
		_ = b.FlushError()
	}
}

// WriteTimedOut reports whether a write to w, or to a writer it wraps
// (Unwrap), ended because the client did not take it within the server's
// write wait. A handler mounted with [WithMCP] asks it once the SDK is done
// with the request: the client is gone for its answer.
func WriteTimedOut(w http.ResponseWriter) bool {
	for w != nil {
		if b, ok := w.(*boundedWriter); ok {
			return b.hasTimedOut()
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return false
		}
		w = u.Unwrap()
	}
	return false
}

// boundWrites applies the write wait to next's answers.
func (s *Server) boundWrites(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The request's context ends with a timeout too: net/http ends it
		// only when a write on the connection fails, and the timer may
		// fire as a write completes, leaving later writes to fail here
		// without reaching the connection (the MCP SDK waits on the
		// context, not on its writes' errors).
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		r = r.WithContext(ctx)
		b := &boundedWriter{
			ResponseWriter: w,
			rc:             http.NewResponseController(w),
			clock:          s.clock,
			wait:           s.cfg.WriteWait,
			expired: func() {
				route := "unmatched"
				if rctx := chi.RouteContext(r.Context()); rctx != nil && rctx.RoutePattern() != "" {
					route = rctx.RoutePattern()
				}
				s.metrics.writeTimeouts.WithLabelValues(route).Inc()
				cancel()
			},
		}
		next.ServeHTTP(b, r)
		b.finish()
	})
}

// newWriteTimeouts is the counter of answers cut at the write wait.
func newWriteTimeouts() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_api_write_timeouts_total",
		Help: "HTTP answers cut because the client did not take one write within http.websocket.write_wait " +
			"(event streams, ?wait answers, intent lookups, MCP streams), by route pattern.",
	}, []string{"route"})
}
