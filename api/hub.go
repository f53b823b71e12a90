package api

import (
	"github.com/switchboard-mcp/switchboard/schemas"
)

// hub is the fan-out of the feed's records to stream subscribers: where the
// feed stands (its position and cursor), who subscribed to what (the index,
// and its progress side), and the delivery of each result, timeout event and
// progress record to the subscribers it matches, once each, without ever
// blocking on one. It fans out and nothing else: the results it sends live in
// the store, ?wait's waiters and the in-flight counts are their own types,
// and Results holds all of them under one mutex (hub's methods are called
// with Results.mu held).
type hub struct {
	// st is the store whose entries the hub sends: it encodes each result
	// once, there, for every subscriber.
	st *store

	// pos is where the feed stands: every record before it has been fanned
	// out. cursor is its text, recomputed when stale.
	pos         Position
	cursor      string
	cursorStale bool

	// seq numbers fan-outs so that a subscriber matched twice by one record
	// (by intent id and by session, say) gets it once.
	seq   uint64
	index // its intent-id entries are one-shot: removed on delivery of the result

	prog progressFanOut // progress subscriptions and watches (progress.go, watch.go)
}

func newHub(st *store) hub {
	return hub{st: st, index: index{
		byIntent:  map[string]map[*subscriber]struct{}{},
		bySession: map[string]map[*subscriber]struct{}{},
		byType:    map[string]map[*subscriber]struct{}{},
	}}
}

// sink receives encoded stream messages. deliver is called with Results.mu
// held and must not block nor call back into Results.
type sink interface {
	deliver(msg []byte)
}

// subscriber is one stream connection's registration. Its fields are guarded
// by Results.mu.
type subscriber struct {
	sink   sink
	seq    uint64
	tenant *string // when set, only this tenant's results (tenant.go)
	filters

	// replay is set while a resume replays history: live messages wait in
	// it and go out after the replayed ones.
	replay *replayState
	// floor is set while the client's resume cursor is ahead of this
	// instance's feed on some partition: live records before it were sent
	// by another instance and are skipped, and cursors never go back.
	floor *Position
	// positioned is set once s subscribed or resumed: from then on the
	// messages it is sent carry cursors.
	positioned bool

	prog filters // the subscriptions that asked for progress (progress.go)
}

func newSubscriber(s sink) *subscriber {
	return &subscriber{sink: s, filters: filters{
		intents:  map[string]struct{}{},
		sessions: map[string]struct{}{},
		types:    map[string]struct{}{},
	}}
}

// advance moves the feed's position past a record, if the position holds
// its partition.
func (h *hub) advance(k Stream, partition int32, offset int64) bool {
	offs := h.pos.of(k)
	if partition < 0 || int(partition) >= len(offs) {
		return false
	}
	offs[partition] = max(offs[partition], offset+1)
	h.cursorStale = true
	return true
}

// hubCursor returns the text of the feed's position.
func (h *hub) hubCursor() string {
	if h.cursorStale {
		h.cursor = h.pos.String()
		h.cursorStale = false
	}
	return h.cursor
}

// fanOut sends the result e to every subscriber it matches, once each.
// Intent-id subscriptions are one-shot: they end with the delivery (only for
// the subscribers that may see e; another tenant's keeps waiting, as for a
// result that never comes).
func (h *hub) fanOut(e *entry) {
	res := e.res
	ev := &event{kind: StreamResults, hasPos: e.hasPos, partition: e.partition, offset: e.offset, entry: e}
	h.seq++
	h.reach(res.IntentID, res.SessionID, res.IntentType, func(s *subscriber, byID bool) {
		if !byID {
			h.deliver(s, ev)
			return
		}
		if !s.admitsEvent(ev) {
			return
		}
		h.deliver(s, ev)
		delete(s.intents, res.IntentID)
		removeIndex(h.byIntent, res.IntentID, s)
		h.endProgress(s, res.IntentID)
	})
}

// fanOutEvent sends a timeout event or a progress record of an intent (its
// id, session and type) to every subscriber of x it matches, once each.
func (h *hub) fanOutEvent(x *index, ev *event, id string, session *string, intentType string) {
	h.seq++
	x.reach(id, session, intentType, func(s *subscriber, _ bool) { h.deliver(s, ev) })
}

// deliver sends ev to s unless s already had it in this fan-out, s may not
// see it (another tenant's), or the client's resume cursor is past it.
func (h *hub) deliver(s *subscriber, ev *event) {
	if s.seq == h.seq || !s.admitsEvent(ev) {
		return
	}
	s.seq = h.seq
	var msg []byte
	if s.floor != nil {
		if ev.hasPos && ev.offset < s.floor.at(ev.kind, ev.partition) {
			return
		}
		c := h.pos.max(*s.floor)
		if !h.pos.behind(*s.floor) {
			s.floor = nil
		}
		msg = ev.frame(h.st, c.String())
	} else {
		if ev.msg == nil {
			ev.msg = ev.frame(h.st, h.hubCursor())
		}
		msg = ev.msg
	}
	if msg != nil {
		h.send(s, msg)
	}
}

// send hands msg to s's sink, or, while s replays history, to its queue of
// live messages.
func (h *hub) send(s *subscriber, msg []byte) {
	if rs := s.replay; rs != nil {
		if len(rs.pending) >= rs.limit || rs.bytes+len(msg) > rs.byteLimit {
			rs.overflowed = true
			return
		}
		rs.pending = append(rs.pending, msg)
		rs.bytes += len(msg)
		return
	}
	s.sink.deliver(msg)
}

// cursorFor returns the cursor of a message sent to s now: the feed's
// position, or later where s's resume cursor is ahead of it; "" while s has
// no position yet (it has neither subscribed nor resumed: a cursor then
// would only tell the client to skip what it has not asked for yet).
func (h *hub) cursorFor(s *subscriber) string {
	if !s.positioned {
		return ""
	}
	if s.floor != nil {
		return h.pos.max(*s.floor).String()
	}
	return h.hubCursor()
}

// event is one record on its way to subscribers: a result (entry) or a
// timeout event. msg caches the message with the feed's cursor for one
// fan-out.
type event struct {
	kind      Stream
	hasPos    bool
	partition int32
	offset    int64
	entry     *entry
	timeout   *schemas.IntentTimeout
	progress  *schemas.IntentProgress
	msg       []byte
}

// frame returns the stream message for ev with the given cursor, or nil if
// its record cannot be encoded (an answer that is not JSON).
func (ev *event) frame(st *store, cursor string) []byte {
	if ev.entry != nil {
		body := st.encoded(ev.entry)
		if body == nil {
			return nil
		}
		return frame("result", cursor, "result", body)
	}
	if ev.progress != nil {
		body, err := marshal(ev.progress)
		if err != nil {
			return nil
		}
		return frame("progress", cursor, "progress", body)
	}
	body, err := marshal(ev.timeout)
	if err != nil {
		return nil
	}
	return frame("timeout", cursor, "timeout", body)
}

// frame builds {"type":typ,"cursor":cursor,field:body}. A cursor holds only
// [a-z0-9:,], so it needs no escaping.
func frame(typ, cursor, field string, body []byte) []byte {
	b := make([]byte, 0, len(body)+len(cursor)+len(typ)+len(field)+32)
	b = append(b, `{"type":"`...)
	b = append(b, typ...)
	b = append(b, '"')
	if cursor != "" {
		b = append(b, `,"cursor":"`...)
		b = append(b, cursor...)
		b = append(b, '"')
	}
	b = append(b, `,"`...)
	b = append(b, field...)
	b = append(b, `":`...)
	b = append(b, body...)
	b = append(b, '}')
	return b
}
