package api

import (
	"bufio"
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// streamSocket is the hijacked connection under a WebSocket. Data frames
// are framed here (appendTextFrame) and written either by a flush shard
// without blocking (tryWrite) or by the connection's writer goroutine
// (writeBlocking); gorilla/websocket writes its control frames (ping, pong,
// close) through Write. mu orders all of them, so frames never interleave,
// and unsent, the rest of a write that could not complete, always goes out
// before anything else.
//
// A slow client's writes can be aborted (abort): a blocked write then
// returns at once. What it left of the frame it was in (tail) must still go
// out before a close frame, since a frame cannot be cut; the frames it had
// not begun are dropped (writeClose).
type streamSocket struct {
	net.Conn
	raw syscall.RawConn // nil: no non-blocking writes; the writer goroutine writes

	aborting atomic.Bool // abort was called: writes fail, to make way for a close frame

	mu        sync.Mutex
	unsent    []byte // written before anything else
	tail      int    // unsent[:tail] ends a frame whose start was written; unsent[tail:] starts at a frame
	stopped   bool   // no more data frames: a close frame went or the writer ended
	closeSent bool   // a close frame went: nothing more is written
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
// answer to the client's) no data frame follows (RFC 6455 §5.5.1), and
// nothing at all after one writeClose sent.
func (s *streamSocket) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closeSent {
		return len(p), nil
	}
	if err := s.writeUnsentLocked(); err != nil {
		return 0, err
	}
	if len(p) > 0 && p[0] == finClose { // not the handshake's "HTTP/1.1 101"
		s.stopped = true
	}
	n, err := s.Conn.Write(p)
	if err != nil && n > 0 && n < len(p) { // aborted mid-frame: the rest goes first
		s.unsent, s.tail = append(s.unsent[:0], p[n:]...), len(p)-n
	}
	return n, err
}

const finClose = 0x88 // a close frame's first byte: FIN, opcode 8

// writeUnsentLocked writes unsent, blocking. If the write fails part way,
// what it did not write stays unsent, its frame boundary noted.
func (s *streamSocket) writeUnsentLocked() error {
	if len(s.unsent) == 0 {
		return nil
	}
	n, err := s.Conn.Write(s.unsent)
	if err != nil {
		s.keepUnsentLocked(s.unsent, s.tail, n)
		return err
	}
	s.unsent, s.tail = s.unsent[:0], 0
	if cap(s.unsent) > maxKeptBuffer {
		s.unsent = nil
	}
	return nil
}

// keepUnsentLocked makes unsent what a write of b did not write (its first
// n bytes went), where b[start:] starts at a frame boundary. b may be
// unsent itself.
func (s *streamSocket) keepUnsentLocked(b []byte, start, n int) {
	s.tail = restOfFrame(b, start, n)
	s.unsent = append(s.unsent[:0], b[n:]...) // a forward copy, also when b is unsent
}

// stop drops data frames from now on (what is unsent still goes first: it
// may end in half a frame).
func (s *streamSocket) stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
}

// abort makes the write in progress, and any until writeClose, fail at
// once (a write deadline in the past). Safe to call from any goroutine.
func (s *streamSocket) abort() {
	s.aborting.Store(true)
	_ = s.SetWriteDeadline(aLongTimeAgo)
}

// aborted reports whether err is the failure of a write abort ended.
func (s *streamSocket) aborted(err error) bool {
	return err != nil && s.aborting.Load() && errors.Is(err, os.ErrDeadlineExceeded)
}

// writeClose writes a close frame with payload, blocking: after the rest
// of a frame begun (and, unless dropUnbegun, after every frame unsent), and
// then nothing more. It lifts an abort's deadline first.
func (s *streamSocket) writeClose(payload []byte, dropUnbegun bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closeSent {
		return nil
	}
	_ = s.SetWriteDeadline(time.Time{})
	s.aborting.Store(false)
	b := s.unsent
	if dropUnbegun {
		b = b[:s.tail]
	}
	b = append(b, finClose, byte(len(payload)))
	b = append(b, payload...)
	s.unsent, s.tail = nil, 0
	s.stopped, s.closeSent = true, true
	_, err := s.Conn.Write(b)
	return err
}

// restOfFrame returns how many bytes after the first n of b complete the
// frame that byte n-1 is in, where b[:start] ends a frame begun before b
// and b[start:] is whole frames (as appendTextFrame and gorilla write them:
// unmasked).
func restOfFrame(b []byte, start, n int) int {
	if n <= start {
		return start - n
	}
	end := start
	for end < n {
		end += frameLen(b[end:])
	}
	return end - n
}

// frameLen returns the length of the unmasked frame b starts with.
func frameLen(b []byte) int {
	switch n := int(b[1] & 0x7f); n {
	case 126:
		return 4 + int(binary.BigEndian.Uint16(b[2:4]))
	case 127:
		return 10 + int(binary.BigEndian.Uint64(b[2:10]))
	default:
		return 2 + n
	}
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
