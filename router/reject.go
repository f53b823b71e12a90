package router

import (
	"fmt"
	"strconv"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// reject dead-letters a request and, when its id is readable, resolves it
// rejected so the caller hears why: once. The id is the request's, else the
// record's key; the tenant is the request's when it is a valid one, else
// none. An intent of that key that is pending or was resolved within the
// dedup window keeps its one result: the record is a duplicate.
func (e *engine) reject(rec *port.Record, t *track, class string, cause error, req *schemas.IntentRequest, nowMs int64) {
	e.deadLetter(rec, t, class, cause)
	id := ""
	if req != nil && validID(req.IntentID) {
		id = req.IntentID
	} else if validID(string(rec.Key)) {
		id = string(rec.Key)
	}
	if id == "" {
		return
	}
	var tenant *string
	if req != nil && req.Tenant != nil && intents.ValidLabel(*req.Tenant) {
		tenant = req.Tenant
	}
	key := intentKey(tenant, id)
	if e.known(key) {
		e.m.dupIntents.Inc()
		return
	}
	r := e.unknown
	p := &pending{id: id, key: key, logKey: key, route: r, partition: rec.Partition, recordTs: rec.TimestampMs, receivedAt: nowMs, tenant: tenant}
	if req != nil {
		if known := e.routes[req.IntentType]; known != nil {
			p.route = known
		} else if intents.ValidName(req.IntentType) {
			p.route = &route{name: req.IntentType, m: r.m}
		}
		p.sessionID, p.traceparent = req.SessionID, req.Traceparent
	}
	e.resolve(p, schemas.OutcomeRejected, nil, &schemas.ErrorInfo{Code: class, Message: cause.Error()}, 0, nowMs, t)
}

// deadLetter copies a record to the dead-letter topic with where it came from
// and why.
func (e *engine) deadLetter(rec *port.Record, t *track, class string, cause error) {
	msg := cause.Error()
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	h := make([]port.Header, 0, len(rec.Headers)+5)
	h = append(h, rec.Headers...)
	h = append(h,
		port.Header{Key: port.HeaderOriginalTopic, Value: []byte(rec.Topic)},
		port.Header{Key: port.HeaderOriginalPartition, Value: strconv.AppendInt(nil, int64(rec.Partition), 10)},
		port.Header{Key: port.HeaderOriginalOffset, Value: strconv.AppendInt(nil, rec.Offset, 10)},
		port.Header{Key: port.HeaderErrorClass, Value: []byte(class)},
		port.Header{Key: port.HeaderErrorMessage, Value: []byte(msg)},
	)
	e.emit(&port.Output{Topic: e.topics.DeadLetter, Key: rec.Key, Value: rec.Value, Headers: h}, t)
	e.m.deadLettered.WithLabelValues(rec.Topic, class).Inc()
	e.log.Warn("record dead-lettered", "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "class", class, "error", msg)
}

func (e *engine) encodeFailed(t *track, err error) {
	e.failed(fmt.Errorf("router: encoding an output: %w", err))
	if t != nil {
		t.failed = true
	}
}

// replayOverRejection reports whether a request for an intent already known
// (key) is an operator's replay from the dead-letter topic of an intent that
// was rejected: then its rejection is forgotten (it is served, and its
// result follows the rejected one) and prior is the key of its changelog
// record, which the new intent's records replace.
func (e *engine) replayOverRejection(rec *port.Record, key string) (prior string, ok bool) {
	if !hasHeader(rec, port.HeaderReplayedFrom) {
		return "", false
	}
	done, resolved := e.resolved.get(key)
	if !resolved || done.outcome != schemas.OutcomeRejected {
		return "", false
	}
	if e.resolved.delete(key) {
		e.resolved.ids.remove(key)
	}
	if done.logKey == "" {
		return key, true
	}
	return done.logKey, true
}

func hasHeader(rec *port.Record, key string) bool {
	for _, h := range rec.Headers {
		if h.Key == key {
			return true
		}
	}
	return false
}
