package api

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// Stream error codes of resume. They are stable: clients may switch on them.
const (
	codeBadCursor         = "bad_cursor"         // the cursor is not one this server wrote, or names other partitions
	codeCursorExpired     = "cursor_expired"     // part of what the cursor asks for is past retention; see "earliest"
	codeBadResume         = "bad_resume"         // resume on a connection that already subscribed or resumed
	codeResumeUnavailable = "resume_unavailable" // this server cannot replay (no history, or its feed has not started)
)

// History reads the results, timeouts and progress topics back, for resume
// and for Server-Sent Events. The Kafka implementation reads them with a
// consumer that joins no group.
type History interface {
	// Earliest returns the oldest position the topics still hold (each
	// partition's first offset).
	Earliest(ctx context.Context) (Position, error)

	// Replay calls fn with every record of each partition from from
	// (inclusive) up to to (exclusive), in offset order within a partition,
	// and returns once every partition has been read up to to. Records of
	// different partitions may interleave. A record that cannot be decoded
	// is passed with a nil Result and Timeout. Replay returns
	// [ErrCursorExpired] if part of the range is no longer held, and fn's
	// error if fn fails.
	Replay(ctx context.Context, from, to Position, fn func(Record) error) error
}

// Record is one decoded record of the results, timeouts or progress topic.
type Record struct {
	Stream    Stream
	Partition int32
	Offset    int64
	Result    *schemas.IntentResult   // Stream == StreamResults
	Timeout   *schemas.IntentTimeout  // Stream == StreamTimeouts
	Progress  *schemas.IntentProgress // Stream == StreamProgress
}

// ErrCursorExpired is returned by [History.Replay] when records the replay
// needs have been deleted (retention).
var ErrCursorExpired = errors.New("api: cursor older than retention")

// WithHistory lets stream clients resume: h replays what they missed.
// Without it, resume messages get a "resume_unavailable" error.
func WithHistory(h History) Option { return func(o *options) { o.history = h } }

// resumeRequest is {"resume":{"cursor":"...","subscriptions":[{...},...]}}.
type resumeRequest struct {
	Cursor        string         `json:"cursor"`
	Subscriptions []subscription `json:"subscriptions"`
}

// resumedMessage ends a replay: what follows is live.
type resumedMessage struct {
	Type          string         `json:"type"` // "resumed"
	Cursor        string         `json:"cursor"`
	Replayed      int            `json:"replayed"`
	Subscriptions []subscription `json:"subscriptions"`
}

// expiredMessage answers a resume whose cursor is past retention.
type expiredMessage struct {
	Type   string      `json:"type"` // "error"
	Cursor string      `json:"cursor,omitempty"`
	Error  expiredBody `json:"error"`
}

type expiredBody struct {
	Code     string `json:"code"`
	Message  string `json:"message"`
	Earliest string `json:"earliest"`
}

// replayState is a subscriber's state while a resume replays history.
type replayState struct {
	pending    [][]byte // live messages that arrived during the replay
	bytes      int      // their size
	limit      int
	byteLimit  int
	overflowed bool
}

// replayPendingFactor times Config.SendQueue is how many live messages may
// wait for one replay to finish before the client counts as too slow, and
// replayPendingBytes times Config.SendQueue how many bytes.
const (
	replayPendingFactor = 16
	replayPendingBytes  = 64 << 10
)

// resume handles a resume message on the reader goroutine: it registers the
// subscriptions with live messages held back, replays from history what
// matched them between the client's cursor and the feed's position, sends
// "resumed", then sends the held-back live messages and lets live messages
// flow. The replay and the live feed meet at the feed's position L taken
// under the lock that registers the subscriptions: history gives every
// record before L, the live feed every record from L on, so nothing is sent
// twice or missed. Reading nothing else while it replays, the reader keeps
// the connection's messages in order.
func (c *wsConn) resume(req resumeRequest) {
	result := c.replay(req)
	c.srv.front.resumes.WithLabelValues(result).Inc()
}

// replay does the work of resume and returns its result for the metrics.
func (c *wsConn) replay(req resumeRequest) string {
	r, h := c.srv.results, c.srv.history
	if c.resumed {
		c.sendError(codeBadResume, "a connection resumes once; open a new connection to resume again")
		return "refused"
	}
	if h == nil {
		c.sendError(codeResumeUnavailable, "this server cannot replay history; subscribe instead")
		return "refused"
	}
	if len(req.Subscriptions) == 0 {
		c.sendError(codeBadMessage, "resume needs the connection's subscriptions")
		return "refused"
	}
	n := 0
	for _, f := range req.Subscriptions {
		if err := checkSubscription(f); err != nil {
			c.sendError(codeBadMessage, err.Error())
			return "refused"
		}
		n += len(f.IntentIDs)
		if f.SessionID != "" {
			n++
		}
		if f.IntentType != "" {
			n++
		}
	}
	if n > c.srv.cfg.MaxSubscriptions {
		c.sendError(codeTooManySubscriptions,
			fmt.Sprintf("a connection may hold %d subscriptions", c.srv.cfg.MaxSubscriptions))
		return "refused"
	}
	from, err := ParseCursor(req.Cursor)
	if err != nil {
		c.sendError(codeBadCursor, err.Error())
		return "refused"
	}
	hub := r.Position()
	if len(hub.Results) == 0 {
		c.sendError(codeResumeUnavailable, "this server's feed has not started yet; retry")
		return "refused"
	}
	if len(from.Progress) == 0 && len(hub.Progress) > 0 {
		// A cursor from before the progress stream: results and timeouts
		// resume from it, progress from now on.
		from.Progress = slices.Clone(hub.Progress)
	}
	if !from.sameShape(hub) {
		c.sendError(codeBadCursor, fmt.Sprintf("the cursor names %d+%d+%d partitions, the topics have %d+%d+%d",
			len(from.Results), len(from.Timeouts), len(from.Progress), len(hub.Results), len(hub.Timeouts), len(hub.Progress)))
		return "refused"
	}
	if !c.srv.admitReplay(c.sub.tenant) {
		c.sendError(codeResumeUnavailable, "too many resumes are replaying history on this server; retry shortly")
		return "refused"
	}
	defer c.srv.releaseReplay(c.sub.tenant)
	ctx, cancel := context.WithCancel(c.srv.stopCtx)
	defer cancel()
	// The replay ends with the connection: busy here, the reader would not
	// notice the client gone, and Kafka would be read for nobody.
	go func() {
		select {
		case <-c.writerDone:
		case <-c.slow:
		case <-c.away:
		case <-ctx.Done():
		}
		cancel()
	}()
	earliest, err := h.Earliest(ctx)
	if err != nil {
		c.sendError(codeUnavailable, "reading the topics' retention: "+err.Error())
		return "failed"
	}
	if !earliest.sameShape(from) || from.behind(earliest) {
		c.sendExpired(from, from, earliest)
		return "cursor_expired"
	}
	c.resumed = true
	live, err := r.beginReplay(c.sub, from, req.Subscriptions,
		replayPendingFactor*c.srv.cfg.SendQueue, replayPendingBytes*c.srv.cfg.SendQueue)
	if err != nil {
		c.sendError(codeBadResume, err.Error())
		return "refused"
	}
	cur := from.Clone()
	replayed := 0
	each := func(rec Record) error {
		// The reader, replaying, reads no pongs meanwhile: a replay that
		// makes progress keeps the connection alive, even if few records
		// match (a dead client is still found: its writes fail or stall).
		c.lastSeen.Store(c.srv.clock.Now().UnixNano())
		if r.heldBackOverflowed(c.sub) { // too slow: closed with 1013, stop reading for it
			c.markSlow()
			return errConnClosing
		}
		offs := cur.of(rec.Stream)
		if rec.Partition < 0 || int(rec.Partition) >= len(offs) {
			return nil
		}
		offs[rec.Partition] = rec.Offset + 1
		var msg []byte
		if rec.Stream == StreamProgress {
			msg = r.replayProgressMessage(c.sub, rec, cur)
		} else {
			msg = r.replayMessage(c.sub, rec, cur)
		}
		if msg == nil {
			return nil
		}
		if !c.sendWait(msg) {
			return errConnClosing
		}
		replayed++
		return nil
	}
	// Progress first: the feed moves past a result only once it has moved
	// past the intent's progress (Feed), so the progress of every result
	// before live is before live too, and replays before it.
	err = h.Replay(ctx, Position{Results: live.Results, Timeouts: live.Timeouts, Progress: from.Progress}, live, each)
	if err == nil {
		err = h.Replay(ctx, Position{Results: from.Results, Timeouts: from.Timeouts, Progress: live.Progress}, live, each)
	}
	switch {
	case errors.Is(err, errConnClosing), c.srv.stopCtx.Err() != nil, ctx.Err() != nil:
		return "failed" // the writer closes the connection (1001 on shutdown)
	case errors.Is(err, ErrCursorExpired):
		// Deleted between Earliest and the read: the client must choose.
		// Its position is where the replay got to.
		r.unsubscribeAll(c.sub)
		r.endReplay(c.sub)
		c.resumed = false
		if e, eerr := h.Earliest(ctx); eerr == nil {
			earliest = e
		}
		c.sendExpired(cur, from, earliest)
		return "cursor_expired"
	case err != nil:
		c.srv.log.Warn("resume: replay failed", "error", err)
		_ = c.conn.Close()
		return "failed"
	}
	b, _ := marshal(resumedMessage{
		Type: "resumed", Cursor: from.max(live).String(),
		Replayed: replayed, Subscriptions: req.Subscriptions,
	})
	if !c.sendWait(b) {
		return "failed"
	}
	c.srv.front.replayed.Add(float64(replayed))
	c.flushReplay()
	return "resumed"
}

// errConnClosing stops a replay whose connection is closing.
var errConnClosing = errors.New("connection closing")

// sendExpired answers a resume whose cursor (from) is past retention with
// the nearest position that is not. The message's cursor is the client's
// position: what it sent, or where the replay got to.
func (c *wsConn) sendExpired(at, from, earliest Position) {
	e := earliest
	if from.sameShape(earliest) {
		e = from.max(earliest)
	}
	c.srv.results.sendTo(c.sub, func(string) []byte {
		b, _ := marshal(expiredMessage{Type: "error", Cursor: at.String(), Error: expiredBody{
			Code:     codeCursorExpired,
			Message:  "part of what the cursor asks for is no longer held; resume from earliest (accepting the gap) or subscribe",
			Earliest: e.String(),
		}})
		return b
	})
}

// flushReplay sends the live messages held back during the replay, in
// order and waiting for room in the send queue, then lets live messages
// flow to the send queue directly. It hands over only once the queue is at
// most half full, so the first live message does not overflow it.
func (c *wsConn) flushReplay() {
	r := c.srv.results
	for {
		r.mu.Lock()
		rs := c.sub.replay
		if rs == nil {
			r.mu.Unlock()
			return
		}
		if rs.overflowed {
			r.mu.Unlock()
			c.markSlow()
			return
		}
		batch := rs.pending
		rs.pending = nil
		if len(batch) == 0 && c.queue.len() <= c.queue.max/2 {
			c.sub.replay = nil
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		if len(batch) == 0 {
			select { // wait for the writer to make room
			case <-c.wrote:
				c.lastSeen.Store(c.srv.clock.Now().UnixNano()) // see sendWait
			case <-c.slow:
				return
			case <-c.away:
				return
			case <-c.writerDone:
				return
			}
		}
		for _, msg := range batch {
			if !c.sendWait(msg) {
				return
			}
		}
	}
}

// beginReplay registers the subscriptions of a resume on s with live
// messages held back, and returns the feed's position: the replay covers
// what comes before it. An intent id whose stored result was read before
// from was sent before the cursor: it is not subscribed again.
func (r *Results) beginReplay(s *subscriber, from Position, subs []subscription, limit, byteLimit int) (Position, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.count() > 0 || s.replay != nil {
		return Position{}, errors.New("resume must come before any subscribe")
	}
	for _, f := range subs {
		if f.SessionID != "" {
			s.sessions[f.SessionID] = struct{}{}
			addIndex(r.bySession, f.SessionID, s)
		}
		if f.IntentType != "" {
			s.types[f.IntentType] = struct{}{}
			addIndex(r.byType, f.IntentType, s)
		}
		for _, id := range f.IntentIDs {
			if e := r.storedFor(s, id); e != nil && e.hasPos && e.offset < from.at(StreamResults, e.partition) {
				continue
			}
			s.intents[id] = struct{}{}
			addIndex(r.byIntent, id, s)
		}
	}
	r.registerProgress(s, subs)
	s.replay = &replayState{limit: max(limit, 1), byteLimit: max(byteLimit, 1)}
	s.positioned = true
	live := r.pos.Clone()
	if live.behind(from) {
		f := from.Clone()
		s.floor = &f
	}
	return live, nil
}

// heldBackOverflowed reports whether the live messages held back for s's
// replay passed their cap.
func (r *Results) heldBackOverflowed(s *subscriber) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return s.replay != nil && s.replay.overflowed
}

// endReplay drops s's replay state and what it held back.
func (r *Results) endReplay(s *subscriber) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.replay = nil
	s.floor = nil
	s.positioned = false
}

// replayMessage returns the message for a replayed record if it matches s's
// subscriptions (ending a matched intent-id subscription), or nil. A result
// whose intent this instance holds from another offset is a redelivery and
// is skipped, as the live feed skips it.
func (r *Results) replayMessage(s *subscriber, rec Record, cur Position) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case rec.Result != nil:
		res := rec.Result
		if !s.admits(res) {
			return nil
		}
		if e := r.st.get(keyOf(res)); e != nil && e.res != nil && e.hasPos && (e.partition != rec.Partition || e.offset != rec.Offset) {
			return nil
		}
		match, byID := s.match(res.IntentID, res.SessionID, res.IntentType)
		if byID {
			delete(s.intents, res.IntentID)
			removeIndex(r.byIntent, res.IntentID, s)
			r.endProgress(s, res.IntentID)
		}
		if !match {
			return nil
		}
		b, err := marshal(res)
		if err != nil {
			return nil
		}
		return frame("result", cur.String(), "result", b)
	case rec.Timeout != nil:
		t := rec.Timeout
		if !s.admitsTimeout(t) {
			return nil
		}
		if match, _ := s.match(t.IntentID, t.SessionID, t.IntentType); !match {
			return nil
		}
		b, err := marshal(t)
		if err != nil {
			return nil
		}
		return frame("timeout", cur.String(), "timeout", b)
	}
	return nil
}

// sendTo sends s the message build makes with the cursor for s, in order
// with the results the feed sends it.
func (r *Results) sendTo(s *subscriber, build func(cursor string) []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if msg := build(r.cursorFor(s)); msg != nil {
		r.send(s, msg)
	}
}

// admitReplay counts a replay of tenant (nil: no tenant), or reports false
// if the server or the tenant already replays Config.MaxReplays or
// Config.MaxReplaysPerTenant. Each true must be paired with releaseReplay.
func (s *Server) admitReplay(tenant *string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.replays >= s.cfg.MaxReplays || (tenant != nil && s.tenantReplays[*tenant] >= s.cfg.MaxReplaysPerTenant) {
		return false
	}
	s.replays++
	if tenant != nil {
		if s.tenantReplays == nil {
			s.tenantReplays = map[string]int{}
		}
		s.tenantReplays[*tenant]++
	}
	return true
}

func (s *Server) releaseReplay(tenant *string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replays--
	if tenant != nil {
		if s.tenantReplays[*tenant]--; s.tenantReplays[*tenant] <= 0 {
			delete(s.tenantReplays, *tenant)
		}
	}
}
