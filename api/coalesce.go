package api

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync"
)

// Write coalescing. gorilla/websocket writes every message with its own
// write(2) on the hijacked connection, so a fan-out of one result to N
// sockets costs N syscalls, and a writer that finds k messages queued pays k
// of them: at thousands of connections that is where the time goes
// (BENCHMARKS.md: 49 % of CPU in syscalls at 5,000 connections). The writer
// loop instead gathers what is queued into one buffer and writes it once.

// maxCoalesce bounds one gathered write.
const maxCoalesce = 64 << 10

// coalescingConn is the hijacked connection under a WebSocket. Between
// gather and flush its writes go to a buffer; otherwise straight through.
// Writes may come from the writer loop and from gorilla's reader (pong and
// close answers), so it locks.
type coalescingConn struct {
	net.Conn
	mu        sync.Mutex
	gathering bool
	buf       []byte
}

func (c *coalescingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gathering {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// gather starts buffering writes.
func (c *coalescingConn) gather() {
	c.mu.Lock()
	c.gathering = true
	c.mu.Unlock()
}

// full reports whether the gathered bytes should be written now.
func (c *coalescingConn) full() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.buf) >= maxCoalesce
}

// flush writes what was gathered in one write and stops gathering.
func (c *coalescingConn) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gathering = false
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	if cap(c.buf) > 4*maxCoalesce {
		c.buf = nil // do not keep a burst's buffer for the connection's life
	} else {
		c.buf = c.buf[:0]
	}
	return err
}

// coalescingWriter hands the upgrader a coalescingConn when it hijacks the
// connection.
type coalescingWriter struct {
	http.ResponseWriter
	conn *coalescingConn
}

var errNotHijacker = errors.New("api: the response writer cannot be hijacked")

func (w *coalescingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errNotHijacker
	}
	conn, brw, err := h.Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.conn = &coalescingConn{Conn: conn}
	return w.conn, brw, nil
}
