package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jonboulle/clockwork"
)

// Request bodies are read against the clock and never waited for when the
// answer does not need them:
//
//   - a body declared larger than Config.MaxBodyBytes is refused at once
//     with 413, before authentication, without reading it;
//   - a body has Config.BodyReadTimeout, from the end of its headers, to
//     arrive whole; then the read in progress fails (errBodyTimeout) and the
//     request is answered 408 body_timeout. The timer runs on the injected
//     clock: when it fires, the connection's read deadline is set in the
//     past, which ends a blocked read at once. It stops once the body has
//     been read to its end, so a ?wait request may then hold its answer for
//     up to MaxWait;
//   - any answer written before the body was read to its end (a 401 or 403
//     from the guard, a 404, a 400 on a bad parameter, a 413, a 408) says
//     Connection: close, and the connection closes right after it. net/http
//     would otherwise read up to 256 KiB of the unread body, at the client's
//     pace, before sending the answer (to keep the connection) or before
//     closing; so a client without a credential gets its 401 at once, and
//     holds no connection however slowly it sends.
//
// The headers themselves are bounded by http.Server's ReadHeaderTimeout and
// MaxHeaderBytes (set by Run), idle keep-alive connections by IdleTimeout.

// Error code of a body that did not arrive in time.
const codeBodyTimeout = "body_timeout" // 408

// aLongTimeAgo is a read deadline in the past: it ends a blocked read at
// once (a fixed instant, not the wall clock's now).
var aLongTimeAgo = time.Unix(1, 0)

// requestBody is a request's body as the handler reads it: it notes the end
// of the body and stops the read timer there.
type requestBody struct {
	io.ReadCloser

	mu       sync.Mutex
	done     bool // read to its end
	timedOut bool // the read timer fired first
	timer    clockwork.Timer
	release  func() // the body's reservation (reading.go); nil: none
}

func (b *requestBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case errors.Is(err, io.EOF):
		b.finish()
	case err != nil && b.expired():
		err = fmt.Errorf("%w: %w", errBodyTimeout, err)
	}
	return n, err
}

// finish marks the body read, stops its timer and releases its
// reservation.
func (b *requestBody) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done = true
	if b.timer != nil {
		b.timer.Stop()
	}
	if b.release != nil {
		b.release()
		b.release = nil
	}
}

// onFinish sets what finish releases.
func (b *requestBody) onFinish(release func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.release = release
}

func (b *requestBody) expired() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.timedOut
}

// unread reports whether the body has not been read to its end.
func (b *requestBody) unread() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.done
}

// expire is the timer's: it ends the read in progress unless the body has
// been read meanwhile, and releases the body's reservation.
func (b *requestBody) expire(rc *http.ResponseController) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	b.timedOut = true
	_ = rc.SetReadDeadline(aLongTimeAgo)
	if b.release != nil { // nothing more can be read: a handler that never reads it holds nothing
		b.release()
		b.release = nil
	}
}

// limitBody applies the rules above. It runs inside observe, whose
// statusRecorder it tells about the body.
func (s *Server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || websocket.IsWebSocketUpgrade(r) {
			next.ServeHTTP(w, r)
			return
		}
		b := &requestBody{ReadCloser: r.Body}
		r.Body = b
		if rec, ok := w.(*statusRecorder); ok {
			rec.body = b
		}
		rc := http.NewResponseController(w)
		defer func() {
			// The answer has said Connection: close. Once it is written,
			// net/http would read what is left of the body (up to 256
			// KiB, at the client's pace) before closing: end that read at
			// once.
			if b.unread() {
				_ = rc.SetReadDeadline(aLongTimeAgo)
			}
			b.finish()
		}()
		if r.ContentLength > s.cfg.MaxBodyBytes {
			writeError(w, http.StatusRequestEntityTooLarge, codeBodyTooLarge,
				fmt.Sprintf("the body is larger than the limit of %d bytes", s.cfg.MaxBodyBytes), "")
			return
		}
		b.mu.Lock()
		b.timer = s.clock.AfterFunc(s.cfg.BodyReadTimeout, func() { b.expire(rc) })
		b.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// writeBodyError answers a failed read of the request body: 413 past the
// size limit, 408 past the read timeout. It reports false, answering
// nothing, for other errors.
func (s *Server) writeBodyError(w http.ResponseWriter, err error) bool {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, codeBodyTooLarge,
			fmt.Sprintf("the body is larger than the limit of %d bytes", mbe.Limit), "")
	case errors.Is(err, errBodyTimeout):
		writeError(w, http.StatusRequestTimeout, codeBodyTimeout,
			fmt.Sprintf("the body did not arrive whole within %v", s.cfg.BodyReadTimeout), "")
	default:
		return false
	}
	return true
}
