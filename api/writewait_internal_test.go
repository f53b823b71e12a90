package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// stuckWriter is a connection's writer whose flush blocks, as on a socket
// whose client stopped reading, until a write deadline is set.
type stuckWriter struct {
	*httptest.ResponseRecorder
	deadline chan struct{}
	flushes  atomic.Int32
}

func (w *stuckWriter) FlushError() error {
	w.flushes.Add(1)
	<-w.deadline
	return errors.New("i/o timeout")
}

func (w *stuckWriter) SetWriteDeadline(time.Time) error {
	close(w.deadline)
	return nil
}

// sdkWrapper stands for a writer wrapped on the way to the MCP SDK
// (sessionCapture): only Unwrap.
type sdkWrapper struct{ http.ResponseWriter }

func (w sdkWrapper) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// A flush through http.ResponseController (as the MCP SDK makes it, through
// a wrapper of ours) is bounded: it ends when the write wait passes on the
// clock, with errWriteTimeout, counted once; later writes fail at once
// without reaching the connection, and WriteTimedOut sees it through the
// wrapper.
func TestBoundedWriterFlushThroughResponseController(t *testing.T) {
	clock := clockwork.NewFakeClock()
	inner := &stuckWriter{ResponseRecorder: httptest.NewRecorder(), deadline: make(chan struct{})}
	var expired atomic.Int32
	bw := &boundedWriter{
		ResponseWriter: inner, rc: http.NewResponseController(inner),
		clock: clock, wait: DefaultWriteWait, expired: func() { expired.Add(1) },
	}
	w := sdkWrapper{bw}
	done := make(chan error, 1)
	go func() { done <- http.NewResponseController(w).Flush() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, 1); err != nil { // the flush's timer
		t.Fatal(err)
	}
	if WriteTimedOut(w) {
		t.Fatal("timed out before the write wait")
	}
	clock.Advance(DefaultWriteWait)
	select {
	case err := <-done:
		if !errors.Is(err, errWriteTimeout) {
			t.Fatalf("flush: %v, want errWriteTimeout", err)
		}
	case <-ctx.Done():
		t.Fatal("the flush did not end at the write wait")
	}
	if _, err := w.Write([]byte("more")); !errors.Is(err, errWriteTimeout) || inner.Body.Len() != 0 {
		t.Fatalf("a later write: %v, %d bytes reached the connection", err, inner.Body.Len())
	}
	if err := http.NewResponseController(w).Flush(); !errors.Is(err, errWriteTimeout) || inner.flushes.Load() != 1 {
		t.Fatalf("a later flush: %v, %d flushes reached the connection", err, inner.flushes.Load())
	}
	if !WriteTimedOut(w) || expired.Load() != 1 {
		t.Fatalf("WriteTimedOut %v, counted %d", WriteTimedOut(w), expired.Load())
	}
}
