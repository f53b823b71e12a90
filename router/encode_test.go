package router

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// TestUnencodablePendingStateRejectsTheIntent: an intent whose pending state
// cannot be encoded (here: over the record size limit, which its request and
// agent request are not) resolves rejected (encode_failed), whether it was
// being dispatched or queued, and leaves its agent's counters as they were.
func TestUnencodablePendingStateRejectsTheIntent(t *testing.T) {
	cfg, err := config.Parse("t.yaml", []byte(`
agents:
  one: {max_in_flight: 1}
intents:
  cached: {agent: one, timeout: 1s, fallback: {cache: {max_age: 1m, key: context_ref}}}
topics:
  partitions: 1
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	const nowMs = 1_800_000_000_000
	ref, tenant := strings.Repeat("r", 256), strings.Repeat("t", 256)
	big := func(id string) *schemas.IntentRequest {
		return &schemas.IntentRequest{IntentID: id, IntentType: "cached", Payload: schemas.JSON(`{}`), ContextRef: &ref, Tenant: &tenant}
	}
	// The pending state repeats the tenant and context_ref in its cache
	// key: the limit lets everything else through.
	plain, err := schemas.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	state, err := plain.Encode(config.DefaultPending, &schemas.PendingIntent{
		IntentID: "b-1", IntentType: "cached", Agent: "one", RecordTs: nowMs, ReceivedAt: nowMs, DispatchedAt: nowMs, Deadline: nowMs + 1000, Attempt: 1,
		CacheKey: tenant + "/" + ref, Payload: schemas.JSON(`{}`), ContextRef: &ref, Tenant: &tenant,
	})
	if err != nil {
		t.Fatal(err)
	}
	e, codec, outs := limitedEngine(t, cfg, len(state)-200, nowMs)
	e.rnd = func(int64) int64 { return 0 }
	request := func(req *schemas.IntentRequest) {
		t.Helper()
		v, err := codec.Encode(config.DefaultRequests, req)
		if err != nil {
			t.Fatal(err)
		}
		e.onRequest(&port.Record{Topic: config.DefaultRequests, Key: []byte(req.IntentID), Value: v, TimestampMs: nowMs}, nil, nowMs)
		e.flush(nowMs)
	}
	result := func(id string) *schemas.IntentResult {
		t.Helper()
		for _, o := range *outs {
			if o.Topic == config.DefaultResults && string(o.Key) == id {
				var res schemas.IntentResult
				if err := codec.Decode(o.Value, &res); err != nil {
					t.Fatal(err)
				}
				return &res
			}
		}
		t.Fatalf("no result for %s", id)
		return nil
	}

	request(big("b-1")) // dispatched: its pending state is too large
	if res := result("b-1"); res.Outcome != schemas.OutcomeRejected || res.Error == nil || res.Error.Code != ClassEncode {
		t.Fatalf("b-1: %+v", res)
	}
	request(&schemas.IntentRequest{IntentID: "s-1", IntentType: "cached", Payload: schemas.JSON(`{}`)}) // takes the one slot
	request(big("b-2"))                                                                                 // queued: its pending state is too large
	if res := result("b-2"); res.Outcome != schemas.OutcomeRejected {
		t.Fatalf("b-2: %+v", res)
	}
	a := e.agents["one"]
	if a.inFlight != 1 || a.queued != 0 || len(e.pending) != 1 || e.pending["s-1"] == nil {
		t.Fatalf("in flight %d, queued %d, pending %d", a.inFlight, a.queued, len(e.pending))
	}
	for _, o := range *outs {
		if o.Topic == "mcp.agent.one.request" && string(o.Key) != "s-1" {
			t.Fatalf("%s was sent to its agent", o.Key)
		}
	}
}

// A resolved marker that cannot be encoded (the result could) still leaves
// the intent resolved: a tombstone replaces the pending record, so that no
// takeover brings it back, and this instance's dedup window holds it.
func TestUnencodableResolvedMarkerTombstonesThePendingRecord(t *testing.T) {
	cfg, err := config.Parse("t.yaml", []byte("agents: {one: {}}\nintents: {plain: {agent: one, timeout: 1s, fallback: {cache: {key: session_id}}}}\ntopics: {partitions: 1}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	const nowMs = 1_800_000_000_000
	// A small payload and a long session id, which is the cache key too:
	// the marker (no payload, but resolved_at and outcome) is then the
	// largest record, the result (the session id once) the smallest.
	payload := schemas.JSON(`{}`)
	session := strings.Repeat("s", 100)
	plain, err := schemas.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	pending := &schemas.PendingIntent{
		IntentID: "m-1", IntentType: "plain", Agent: "one", RecordTs: nowMs, ReceivedAt: nowMs, DispatchedAt: nowMs,
		Deadline: nowMs + 1000, Attempt: 1, Payload: payload, SessionID: &session, CacheKey: session,
	}
	state, err := plain.Encode(config.DefaultPending, pending)
	if err != nil {
		t.Fatal(err)
	}
	// Room for the pending record (and the smaller result), not for it with
	// resolved_at and outcome (about 45 bytes more).
	e, codec, outs := limitedEngine(t, cfg, len(state)+15, nowMs)
	failures := 0
	e.failed = func(error) { failures++ }
	push := func(topic string, rec schemas.Record) {
		t.Helper()
		v, err := codec.Encode(topic, rec)
		if err != nil {
			t.Fatal(err)
		}
		r := &port.Record{Topic: topic, Key: []byte("m-1"), Value: v, TimestampMs: nowMs}
		if topic == config.DefaultRequests {
			e.onRequest(r, nil, nowMs)
		} else {
			e.onResponse(r, nil, nowMs)
		}
		e.flush(nowMs)
	}
	req := &schemas.IntentRequest{IntentID: "m-1", IntentType: "plain", Payload: payload, SessionID: &session}
	push(config.DefaultRequests, req)
	ok := schemas.JSON(`{}`)
	push(config.DefaultResponses, &schemas.AgentResponse{RequestID: "m-1", Agent: "one", Status: schemas.StatusOK, Answer: &ok})
	var results, tombstones, dispatches int
	for _, o := range *outs {
		switch {
		case o.Topic == config.DefaultResults:
			results++
		case o.Topic == config.DefaultPending && o.Value == nil:
			tombstones++
		case o.Topic == "mcp.agent.one.request":
			dispatches++
		}
	}
	if failures != 1 || results != 1 || tombstones != 1 {
		t.Fatalf("failures %d, results %d, tombstones %d: want 1 each", failures, results, tombstones)
	}
	push(config.DefaultRequests, req) // a duplicate: the window holds the intent
	for _, o := range (*outs)[len(*outs)-1:] {
		if o.Topic == "mcp.agent.one.request" {
			t.Fatal("the duplicate was dispatched again")
		}
	}
	if dispatches != 1 || len(e.pending) != 0 {
		t.Fatalf("dispatches %d, pending %d", dispatches, len(e.pending))
	}
}

// limitedEngine is an engine, owning every partition, whose codec refuses
// records over maxRecordBytes; what it emits collects in *outs.
func limitedEngine(t *testing.T, cfg *config.Config, maxRecordBytes int, nowMs int64) (*engine, *schemas.Codec, *[]*port.Output) {
	t.Helper()
	codec, err := schemas.NewCodec(schemas.WithMaxRecordBytes(maxRecordBytes))
	if err != nil {
		t.Fatal(err)
	}
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	e, err := newEngine(cfg, codec, m, slog.New(slog.DiscardHandler), nowMs)
	if err != nil {
		t.Fatal(err)
	}
	outs := new([]*port.Output)
	e.emit = func(o *port.Output, _ *track) { // and what follows it (Then), as one transaction would
		for ; o != nil; o = o.Then {
			*outs = append(*outs, o)
		}
	}
	e.toAgent = e.emit
	e.failed = func(error) {}
	e.owns = func(int32) bool { return true }
	return e, codec, outs
}
