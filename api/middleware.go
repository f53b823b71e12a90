package api

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"

	"github.com/go-chi/chi/v5"
)

// observe counts, times and logs (at debug level) every request. It is the
// outermost middleware, so it sees the status that recoverer writes.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.clock.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)

		route := chi.RouteContext(r.Context()).RoutePattern()
		if route == "" {
			route = "unmatched"
		}
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		elapsed := s.clock.Since(start)
		s.metrics.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
		if !rec.hijacked {
			s.metrics.duration.WithLabelValues(route).Observe(elapsed.Seconds())
		}
		if s.log.Enabled(r.Context(), slog.LevelDebug) {
			s.log.LogAttrs(r.Context(), slog.LevelDebug, "http request",
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.String("route", route),
				slog.Int("status", status),
				slog.Int64("bytes", rec.bytes),
				slog.Duration("duration", elapsed),
				slog.String("remote", r.RemoteAddr))
		}
	})
}

// recoverer turns a handler panic into a logged 500 JSON error (chi's
// middleware.Recoverer answers in text). http.ErrAbortHandler is re-raised, as
// net/http expects.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler { //nolint:errorlint // net/http panics with this exact value
				panic(v)
			}
			s.log.LogAttrs(r.Context(), slog.LevelError, "panic in http handler",
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.String("panic", fmt.Sprint(v)),
				slog.String("stack", string(debug.Stack())))
			if rec, ok := w.(*statusRecorder); ok && (rec.status != 0 || rec.hijacked) {
				return // too late to answer
			}
			writeError(w, http.StatusInternalServerError, codeInternal, "internal error", "")
		}()
		next.ServeHTTP(w, r)
	})
}

// statusRecorder remembers the status and size of a response. It passes
// Flush and Hijack through (gorilla's upgrader needs http.Hijacker on the
// writer itself).
//
// When the request has a body (body.go), an answer that starts before the
// body was read to its end closes the connection after it.
type statusRecorder struct {
	http.ResponseWriter
	status   int
	bytes    int64
	hijacked bool
	body     *requestBody // nil: no body
}

// starting is called before the header goes out.
func (w *statusRecorder) starting() {
	if w.status == 0 && w.body != nil && w.body.unread() {
		w.Header().Set("Connection", "close")
	}
}

func (w *statusRecorder) WriteHeader(code int) {
	if code >= 200 {
		w.starting()
	}
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.starting()
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusRecorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		if w.status == 0 {
			w.starting()
			w.status = http.StatusOK
		}
		f.Flush()
	}
}

func (w *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("api: the response writer cannot be hijacked")
	}
	c, rw, err := h.Hijack()
	if err == nil {
		w.hijacked = true
		w.status = http.StatusSwitchingProtocols
	}
	return c, rw, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }
