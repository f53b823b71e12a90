package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/switchboard-mcp/switchboard/intents"
)

// The stream protocol's messages (see Server.Handler for examples).

// clientMessage is what a client sends: exactly one of its fields.
type clientMessage struct {
	Subscribe   *subscription  `json:"subscribe,omitempty"`
	Unsubscribe *subscription  `json:"unsubscribe,omitempty"`
	Resume      *resumeRequest `json:"resume,omitempty"`
}

// subscription selects results by intent ids, session id and/or intent type;
// with Progress, the selected intents' progress too (progress.go).
type subscription struct {
	IntentIDs  []string `json:"intent_ids,omitempty"`
	SessionID  string   `json:"session_id,omitempty"`
	IntentType string   `json:"intent_type,omitempty"`
	Progress   bool     `json:"progress,omitempty"`
}

// ackMessage acknowledges a subscribe or an unsubscribe.
type ackMessage struct {
	Type         string       `json:"type"` // "subscribed" or "unsubscribed"
	Cursor       string       `json:"cursor,omitempty"`
	Subscription subscription `json:"subscription"`
}

// errorMessage answers a client message that could not be honoured.
type errorMessage struct {
	Type   string    `json:"type"` // "error"
	Cursor string    `json:"cursor,omitempty"`
	Error  errorBody `json:"error"`
}

// serveStream serves GET /v1/stream: it upgrades to a WebSocket and runs the
// connection until it closes. The handler's goroutine is the reader; it
// starts the writer and waits for it.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request) {
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
	hw := &hijackRecorder{ResponseWriter: w}
	conn, err := s.upgrader.Upgrade(hw, r, nil)
	if err != nil {
		return // the upgrader has answered through upgradeError
	}
	c := newWSConn(s, conn)
	c.out = hw.socket
	if c.out.raw != nil { // else the writer goroutine writes everything
		c.shard = s.flush.pick()
		c.queue.pinned = false // before any message is queued
	}
	c.sub.scope(p)
	if !s.track(c) { // Shutdown began during the handshake
		_ = conn.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseGoingAway, "server shutting down"), time.Time{})
		_ = conn.Close()
		return
	}
	defer s.untrack(c)
	s.metrics.wsConnections.Inc()
	defer s.metrics.wsConnections.Dec()

	go c.writeLoop()
	c.readLoop()
	close(c.readerDone)
	<-c.writerDone
	s.results.unsubscribeAll(c.sub)
	_ = conn.Close()
	s.log.LogAttrs(r.Context(), slog.LevelDebug, "stream closed", slog.String("remote", r.RemoteAddr))
}

// track registers a new connection unless Shutdown has begun, and starts the
// keepalive goroutine with the first connection.
func (s *Server) track(c *wsConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	s.streams.Add(1)
	if !s.sweeping {
		s.sweeping = true
		go s.keepalive()
		s.flush.start(s.sweeperStop)
	}
	return true
}

func (s *Server) untrack(c *wsConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.streams.Done()
}

// keepalive is one goroutine for all connections (no timer per connection):
// every PingPeriod it closes connections that have been silent for PongWait,
// stuck in one write for WriteWait, or waiting for a close answer for
// WriteWait, and asks the others' writers to ping. Shutdown stops it, after
// the connections are gone.
func (s *Server) keepalive() {
	defer close(s.sweeperDone)
	t := s.clock.NewTicker(s.cfg.PingPeriod)
	defer t.Stop()
	for {
		select {
		case <-s.sweeperStop:
			return
		case <-t.Chan():
			s.checkConns()
		}
	}
}

func (s *Server) checkConns() {
	now := s.clock.Now().UnixNano()
	pongWait, writeWait := s.cfg.PongWait.Nanoseconds(), s.cfg.WriteWait.Nanoseconds()
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		var reason string
		if t := c.closingSince.Load(); t != 0 && now-t > writeWait {
			reason = "no close answer"
		} else if t := c.writingSince.Load(); t != 0 && now-t > writeWait {
			// A client that stops reading is a slow client: the stuck
			// write is aborted and the writer sends it 1013 (which
			// closingSince bounds). Still stuck at the next check: cut.
			if !c.isSlow() {
				c.markSlow()
				continue
			}
			reason = "write stalled"
		} else if now-c.lastSeen.Load() > pongWait {
			reason = "keepalive timeout"
		}
		if reason != "" {
			s.log.LogAttrs(s.stopCtx, slog.LevelDebug, "stream dropped",
				slog.String("reason", reason), slog.String("remote", c.conn.RemoteAddr().String()))
			_ = c.conn.Close() // unblocks the reader and the writer
			// An idle writer learns of the close by writing: the ping below
			// fails, so writerDone closes (and ends a replay in progress).
		}
		select {
		case c.ping <- struct{}{}:
		default:
		}
	}
}

// wsConn is one stream connection. The reader (the handler's goroutine) owns
// the subscriptions; results reach the connection through queue, which a
// flush shard or, when the client falls behind, the writer goroutine drains
// (flush.go); the writer goroutine also pings and closes.
type wsConn struct {
	srv   *Server
	conn  *websocket.Conn
	out   *streamSocket // the socket under conn: data frames go here (flush.go)
	shard *flushShard   // writes without blocking; nil: the writer goroutine writes
	sub   *subscriber

	queue *sendQueue    // bounded: Config.SendQueue
	ping  chan struct{} // buffered 1: keepalive asks for a ping
	wrote chan struct{} // buffered 1: the writer wrote a message (a resume waits for room)

	resumed bool // the reader handled a resume (reader-owned)

	slowOnce   sync.Once
	slow       chan struct{} // closed when queue overflowed: close with 1013
	awayOnce   sync.Once
	away       chan struct{} // closed by Shutdown: close with 1001
	policyOnce sync.Once
	policy     chan struct{} // closed by the reader over the rate limit: close with 1008
	readerDone chan struct{}
	writerDone chan struct{}

	// Keepalive state in unix nanoseconds of the injected clock.
	lastSeen     atomic.Int64 // last pong or message from the client
	writingSince atomic.Int64 // start of the write in progress; 0 if none
	closingSince atomic.Int64 // when our close frame went out; 0 if not yet

	// The reader's rate limit (limits.go).
	limiter       *tokenBucket
	policyClosing bool
}

func newWSConn(s *Server, conn *websocket.Conn) *wsConn {
	c := &wsConn{
		srv:        s,
		conn:       conn,
		queue:      newSendQueue(s.cfg.SendQueue, s.cfg.SendQueueBytes),
		ping:       make(chan struct{}, 1),
		wrote:      make(chan struct{}, 1),
		slow:       make(chan struct{}),
		away:       make(chan struct{}),
		policy:     make(chan struct{}),
		readerDone: make(chan struct{}),
		writerDone: make(chan struct{}),
	}
	c.sub = newSubscriber(c)
	c.lastSeen.Store(s.clock.Now().UnixNano())
	conn.SetReadLimit(s.cfg.MaxMessageBytes)
	conn.SetPongHandler(func(string) error {
		c.lastSeen.Store(s.clock.Now().UnixNano())
		return nil
	})
	// gorilla's own ping handler writes the pong with a write deadline one
	// second away and leaves it on the socket: every later write of ours
	// would fail once it passed. No deadline here: the keepalive check
	// bounds writes.
	conn.SetPingHandler(func(data string) error {
		err := conn.WriteControl(websocket.PongMessage, []byte(data), time.Time{})
		var ne net.Error
		if errors.Is(err, websocket.ErrCloseSent) || (errors.As(err, &ne) && ne.Timeout()) {
			return nil
		}
		return err
	})
	return c
}

// deliver implements sink: it queues a message without blocking.
func (c *wsConn) deliver(msg []byte) { c.send(msg) }

// send queues msg for the writer. If the queue is full the client is too
// slow: it is disconnected with 1013 rather than anyone waiting for it.
func (c *wsConn) send(msg []byte) {
	ok, dirty := c.queue.push(msg)
	switch {
	case !ok:
		c.markSlow()
	case dirty:
		c.shard.add(c)
	}
}

// isSlow reports whether markSlow was called.
func (c *wsConn) isSlow() bool {
	select {
	case <-c.slow:
		return true
	default:
		return false
	}
}

// markSlow asks the writer to close with 1013 and counts a slow client. A
// write to the client in progress is aborted (it would wait for the client
// to read), so that the close frame goes next: the rest of the frame being
// written, then the close frame, dropping what is queued. It never blocks.
func (c *wsConn) markSlow() {
	c.slowOnce.Do(func() {
		select {
		case <-c.writerDone: // already closing: not a slow client
		case <-c.away:
		default:
			c.srv.metrics.wsSlow.Inc()
		}
		if c.out != nil {
			c.out.abort()
		}
		close(c.slow)
	})
}

// sendWait queues msg for the writer, waiting for room: a replay goes at
// the pace of the client. It returns false if the connection is closing.
// A client that takes what is sent is alive, so it counts as seen (the
// reader, busy replaying, does not read pongs meanwhile).
func (c *wsConn) sendWait(msg []byte) bool {
	for {
		ok, dirty := c.queue.push(msg)
		if dirty {
			c.shard.add(c)
		}
		if ok {
			break
		}
		select {
		case <-c.wrote: // room, perhaps
		case <-c.slow:
			return false
		case <-c.away:
			return false
		case <-c.writerDone:
			return false
		}
	}
	c.lastSeen.Store(c.srv.clock.Now().UnixNano())
	return true
}

// sendError sends an error message carrying the connection's cursor, in
// order with its results.
func (c *wsConn) sendError(code, message string) {
	c.srv.results.sendTo(c.sub, func(cursor string) []byte {
		b, _ := marshal(errorMessage{Type: "error", Cursor: cursor, Error: errorBody{Code: code, Message: message}})
		return b
	})
}

// goAway asks the writer to close the connection with 1001.
func (c *wsConn) goAway() { c.awayOnce.Do(func() { close(c.away) }) }

// writeLoop writes queued messages and pings until the connection closes.
// Closing (slow client, shutdown) takes priority over queued messages.
func (c *wsConn) writeLoop() {
	defer close(c.writerDone)
	defer c.stopData()
	var buf []byte // drain's, kept between drains
	for {
		select {
		case <-c.slow:
			c.closeWith(websocket.CloseTryAgainLater, "send queue full")
			return
		case <-c.away:
			c.closeWith(websocket.CloseGoingAway, "server shutting down")
			return
		case <-c.policy:
			c.closeWith(websocket.ClosePolicyViolation, "message rate limit exceeded")
			return
		case <-c.readerDone:
			return
		default:
		}
		select {
		case <-c.slow:
			c.closeWith(websocket.CloseTryAgainLater, "send queue full")
			return
		case <-c.away:
			c.closeWith(websocket.CloseGoingAway, "server shutting down")
			return
		case <-c.policy:
			c.closeWith(websocket.ClosePolicyViolation, "message rate limit exceeded")
			return
		case <-c.readerDone:
			return
		case <-c.ping:
			if err := c.write(websocket.PingMessage, nil); err != nil {
				c.failed(err)
				return
			}
		case <-c.queue.ready:
			var err error
			if buf, err = c.drain(buf); err != nil {
				c.failed(err)
				return
			}
		}
	}
}

// failed ends the connection after a failed write: with 1013 if a slow
// client's write was aborted for it, else at once.
func (c *wsConn) failed(err error) {
	if errors.Is(err, errAborted) || (c.out != nil && c.out.aborted(err)) {
		c.closeWith(websocket.CloseTryAgainLater, "send queue full")
		return
	}
	_ = c.conn.Close()
}

// stopData makes the shard and drain drop data frames from now on.
func (c *wsConn) stopData() {
	if c.out != nil {
		c.out.stop()
	}
}

// write writes one control frame, marking the write for the keepalive check (which
// closes the connection if it takes longer than WriteWait: no socket
// deadlines, so the injected clock rules).
func (c *wsConn) write(typ int, msg []byte) error {
	c.writingSince.Store(c.srv.clock.Now().UnixNano())
	defer c.writingSince.Store(0)
	return c.conn.WriteControl(typ, msg, time.Time{})
}

// closeWith sends a close frame and waits for the reader to see the client's
// answer (or the keepalive check to give up after WriteWait, also while the
// close frame itself cannot be written). A slow client's close (1013) drops
// the frames not yet begun: it would wait for them.
func (c *wsConn) closeWith(code int, reason string) {
	c.stopData() // no data frame after the close frame
	c.closingSince.Store(c.srv.clock.Now().UnixNano())
	msg := websocket.FormatCloseMessage(code, reason)
	var err error
	if c.out != nil {
		err = c.out.writeClose(msg, code == websocket.CloseTryAgainLater)
	} else {
		err = c.write(websocket.CloseMessage, msg)
	}
	if err != nil {
		_ = c.conn.Close()
		return
	}
	<-c.readerDone
}

// readLoop reads client messages until the connection fails or closes.
func (c *wsConn) readLoop() {
	for {
		typ, data, err := c.conn.ReadMessage()
		if err != nil {
			return
		}
		c.receive(typ, data) // rate limit, then handle
	}
}

// handle acts on one client message; a bad one gets an error message and the
// connection stays open.
func (c *wsConn) handle(typ int, data []byte) {
	if typ != websocket.TextMessage {
		c.sendError(codeBadMessage, "messages must be JSON text messages")
		return
	}
	if !utf8.Valid(data) { // encoding/json would collapse bad bytes into U+FFFD
		c.sendError(codeBadMessage, "messages must be valid UTF-8")
		return
	}
	var m clientMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		c.sendError(codeBadMessage, "not a valid message: "+strings.TrimPrefix(err.Error(), "json: "))
		return
	}
	if dec.More() {
		c.sendError(codeBadMessage, "send one JSON object per message")
		return
	}
	n := 0
	for _, set := range []bool{m.Subscribe != nil, m.Unsubscribe != nil, m.Resume != nil} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		c.sendError(codeBadMessage, `send one of "subscribe", "unsubscribe" or "resume" per message`)
	case m.Resume != nil:
		c.resume(*m.Resume)
	case m.Subscribe != nil:
		f := *m.Subscribe
		if err := checkSubscription(f); err != nil {
			c.sendError(codeBadMessage, err.Error())
			return
		}
		err := c.srv.results.subscribe(c.sub, f, c.srv.cfg.MaxSubscriptions, func(cursor string) {
			ack, _ := marshal(ackMessage{Type: "subscribed", Cursor: cursor, Subscription: f})
			c.send(ack)
		})
		if errors.Is(err, errTooManySubscriptions) {
			c.sendError(codeTooManySubscriptions,
				fmt.Sprintf("a connection may hold %d subscriptions; unsubscribe first", c.srv.cfg.MaxSubscriptions))
		} else if err == nil {
			c.srv.sendStoredResults(c.srv.stopCtx, c.sub, f.IntentIDs)
		}
	case m.Unsubscribe != nil:
		f := *m.Unsubscribe
		if err := checkSubscription(f); err != nil {
			c.sendError(codeBadMessage, err.Error())
			return
		}
		c.srv.results.unsubscribe(c.sub, f)
		c.srv.results.sendTo(c.sub, func(cursor string) []byte {
			b, _ := marshal(ackMessage{Type: "unsubscribed", Cursor: cursor, Subscription: f})
			return b
		})
	default:
		c.sendError(codeBadMessage, `expected {"subscribe":{...}}, {"unsubscribe":{...}} or {"resume":{...}}`)
	}
}

// checkSubscription rejects empty subscriptions and values no intent could
// carry.
func checkSubscription(f subscription) error {
	if len(f.IntentIDs) == 0 && f.SessionID == "" && f.IntentType == "" {
		return errors.New("a subscription needs intent_ids, session_id or intent_type")
	}
	for _, id := range f.IntentIDs {
		if id == "" || len(id) > intents.MaxIDLen {
			return fmt.Errorf("intent_ids: %q is not an intent id", id)
		}
	}
	if len(f.SessionID) > intents.MaxLabelLen {
		return errors.New("session_id is too long")
	}
	if f.IntentType != "" && !intents.ValidName(f.IntentType) {
		return fmt.Errorf("intent_type: %q is not an intent type", f.IntentType)
	}
	return nil
}

// checkOrigin allows the WebSocket upgrade from clients that send no
// Origin, from the server's own origin and from Config.AllowedOrigins (see
// guard.go, which has checked the same before authenticating).
func (s *Server) checkOrigin(r *http.Request) bool { return s.originAllowed(r) }

// upgradeError answers a failed WebSocket handshake in JSON.
func (s *Server) upgradeError(w http.ResponseWriter, _ *http.Request, status int, reason error) {
	code := codeBadHandshake
	if status == http.StatusForbidden {
		code = codeForbiddenOrigin
	}
	writeError(w, status, code, reason.Error(), "")
}
