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
