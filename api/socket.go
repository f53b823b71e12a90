package api

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync"
	"syscall"
)

// streamSocket is the hijacked connection under a WebSocket. Data frames
// are framed here (appendTextFrame) and written either by a flush shard
// without blocking (tryWrite) or by the connection's writer goroutine
// (writeBlocking); gorilla/websocket writes its control frames (ping, pong,
// close) through Write. mu orders all of them, so frames never interleave,
// and unsent, the rest of a write that could not complete, always goes out
// before anything else.
type streamSocket struct {
	net.Conn
	raw syscall.RawConn // nil: no non-blocking writes; the writer goroutine writes

	mu      sync.Mutex
	unsent  []byte // written before anything else
	stopped bool   // no more data frames: a close frame went or the writer ended
}

func newStreamSocket(conn net.Conn) *streamSocket {
	s := &streamSocket{Conn: conn}
	if sc, ok := conn.(syscall.Conn); ok && nonBlockingWrites {
		if raw, err := sc.SyscallConn(); err == nil {
			s.raw = raw
		}
	}
	return s
}

// Write is how gorilla/websocket writes its control frames, each whole in
// one call: after unsent, and blocking. After a close frame (ours, or the
// answer to the client's) no data frame follows (RFC 6455 §5.5.1).
func (s *streamSocket) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writeUnsentLocked(); err != nil {
		return 0, err
	}
	if len(p) > 0 && p[0] == finClose { // not the handshake's "HTTP/1.1 101"

		s.stopped = true
	}
	return s.Conn.Write(p)
}

const finClose = 0x88 // a close frame's first byte: FIN, opcode 8

func (s *streamSocket) writeUnsentLocked() error {
	if len(s.unsent) == 0 {
		return nil
	}
	_, err := s.Conn.Write(s.unsent)
	s.unsent = s.unsent[:0]
	if cap(s.unsent) > maxKeptBuffer {
		s.unsent = nil
	}
	return err
}

// stop drops data frames from now on (what is unsent still goes first: it
// may end in half a frame).
func (s *streamSocket) stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
}

// maxKeptBuffer bounds the buffers kept between writes; a burst's larger
// buffer is dropped after it.
const maxKeptBuffer = 1 << 20

// appendTextFrame appends msg as one unmasked, unfragmented text frame
// (RFC 6455 §5.2: a server's frames are not masked).
func appendTextFrame(b, msg []byte) []byte {
	const finText = 0x81
	switch n := len(msg); {
	case n <= 125:
		b = append(b, finText, byte(n))
	case n <= 0xFFFF:
		b = append(b, finText, 126, byte(n>>8), byte(n))
	default:
		b = append(b, finText, 127,
			byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32), byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, msg...)
}

// hijackRecorder hands the upgrader a streamSocket when it hijacks the
// connection.
type hijackRecorder struct {
	http.ResponseWriter
	socket *streamSocket
}

var errNotHijacker = errors.New("api: the response writer cannot be hijacked")

func (w *hijackRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errNotHijacker
	}
	conn, brw, err := h.Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.socket = newStreamSocket(conn)
	return w.socket, brw, nil
}
