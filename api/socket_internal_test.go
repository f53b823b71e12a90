package api

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// appendTextFrame's frames, of every length encoding (7-bit, 16-bit and
// 64-bit), written back to back in one write, read by gorilla/websocket's
// client as the same messages.
func TestAppendTextFrameIsReadByAWebSocketClient(t *testing.T) {
	sizes := []int{0, 1, 125, 126, 127, 0xFFFF, 0x10000, 70000}
	payload := func(n int) []byte { return bytes.Repeat([]byte{'a' + byte(n%26)}, n) }
	upgrader := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer func() { _ = conn.Close() }()
		var frames []byte
		for _, n := range sizes {
			frames = appendTextFrame(frames, payload(n))
		}
		_, _ = conn.NetConn().Write(frames)
		_, _, _ = conn.ReadMessage() // until the client goes
	}))
	defer srv.Close()
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	for _, n := range sizes {
		typ, got, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("frame of %d bytes: %v", n, err)
		}
		if typ != websocket.TextMessage || !bytes.Equal(got, payload(n)) {
			t.Fatalf("frame of %d bytes: got type %d, %d bytes", n, typ, len(got))
		}
	}
}

// restOfFrame finds, for a write cut after any byte, how much of the frame
// in progress is left, across every length encoding and after the rest of
// an earlier frame.
func TestRestOfFrame(t *testing.T) {
	const start = 7 // the rest of a frame begun in an earlier write
	b := bytes.Repeat([]byte{'r'}, start)
	ends := []int{start}
	for _, n := range []int{0, 5, 125, 126, 300, 0x10000} {
		b = appendTextFrame(b, bytes.Repeat([]byte{'x'}, n))
		ends = append(ends, len(b))
	}
	for n := 0; n <= len(b); n++ {
		want := 0
		for _, e := range ends {
			if e >= n {
				want = e - n
				break
			}
		}
		if got := restOfFrame(b, start, n); got != want {
			t.Fatalf("cut after %d bytes: rest %d, want %d", n, got, want)
		}
	}
}

// The send queue refuses a message that would take it past its byte cap,
// but an empty queue takes a message of any size.
func TestSendQueueByteCap(t *testing.T) {
	q := newSendQueue(100, 10)
	if ok, _ := q.push(make([]byte, 25)); !ok {
		t.Fatal("an empty queue refused a large message")
	}
	if ok, _ := q.push([]byte("x")); ok {
		t.Fatal("a queue past its byte cap took another message")
	}
	q.takeOrRelease()
	for i := range 10 {
		if ok, _ := q.push([]byte("x")); !ok {
			t.Fatalf("message %d of 1 byte refused within the cap", i)
		}
	}
	if ok, _ := q.push([]byte("x")); ok {
		t.Fatal("the 11th byte was taken")
	}
}
