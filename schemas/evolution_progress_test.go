package schemas

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The progress fields (AgentResponse.message, progress, total, partial and
// sequence; IntentResult.progress_count; PendingIntent's progress_*) were
// added after the existing ones with null defaults: an agent or router from
// before them keeps working with one from after.

var agentProgressFields = []string{"message", "progress", "total", "partial", "sequence"}

// An old agent's response (no progress fields), Avro and JSON, reads with the
// new fields nil.
func TestEvolutionProgressOldAgent(t *testing.T) {
	c, fake := newAvroCodec(t)
	old := withoutFields(t, agentResponseAvsc, agentProgressFields...)
	b := writeWith(t, fake, "mcp.agent.response-value", old, map[string]any{
		"request_id": "i-1", "agent": "a", "status": "progress", "answer": nil, "error": nil,
		"produced_at": int64(5), "attempt": int32(1),
	})
	got := AgentResponse{Message: Ptr("stale"), Sequence: Ptr(int64(9))}
	if err := c.Decode(b, &got); err != nil {
		t.Fatal(err)
	}
	want := AgentResponse{RequestID: "i-1", Agent: "a", Status: StatusProgress, ProducedAt: Ptr(int64(5)), Attempt: Ptr(int32(1))}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("old Avro progress read as %+v\nwant %+v", got, want)
	}

	var j AgentResponse
	if err := c.Decode([]byte(`{"request_id":"i-1","agent":"a","status":"progress"}`), &j); err != nil {
		t.Fatal(err)
	}
	if j.Message != nil || j.Partial != nil || j.Sequence != nil || j.Status != StatusProgress {
		t.Fatalf("old JSON progress read as %+v", j)
	}
}

// A new agent's progress response, read by a router from before the fields
// (Avro: resolved against the old schema; JSON: unknown fields ignored),
// is the plain progress message that router knows.
func TestEvolutionProgressOldRouter(t *testing.T) {
	c, _ := newAvroCodec(t)
	resp := &AgentResponse{
		RequestID: "i-1", Agent: "a", Status: StatusProgress, Attempt: Ptr(int32(2)),
		Message: Ptr("searching"), Progress: Ptr(0.4), Total: Ptr(1.0), Partial: Ptr(JSON(`{"text":"Hel"}`)), Sequence: Ptr(int64(7)),
	}
	b, err := c.Encode("mcp.agent.response", resp)
	if err != nil {
		t.Fatal(err)
	}
	old := withoutFields(t, agentResponseAvsc, agentProgressFields...)
	var got struct {
		RequestID string `avro:"request_id"`
		Status    string `avro:"status"`
		Attempt   *int32 `avro:"attempt"`
	}
	if err := decodeWithWriter(b[wireHeaderLen:], agentResponseAvsc, old, &got); err != nil {
		t.Fatal(err)
	}
	if got.RequestID != "i-1" || got.Status != "progress" || got.Attempt == nil || *got.Attempt != 2 {
		t.Fatalf("old router read %+v", got)
	}

	// JSON: the old router's decoder (json.Unmarshal) ignores fields it does
	// not know.
	jc := newJSONCodec(t)
	jb, err := jc.Encode("mcp.agent.response", resp)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(jb), `"partial":{"text":"Hel"}`) {
		t.Fatalf("partial is not embedded JSON: %s", jb)
	}
	var oldJSON struct {
		RequestID string `json:"request_id"`
		Status    string `json:"status"`
	}
	if err := json.Unmarshal(jb, &oldJSON); err != nil || oldJSON.Status != "progress" {
		t.Fatalf("old JSON reader: %+v, %v", oldJSON, err)
	}
}

// A result and a pending record written by a new router read with a reader
// from before progress_count and progress_* (an old API instance, an old
// router restoring during a rolling upgrade); old ones read with nil fields.
func TestEvolutionProgressResultAndPending(t *testing.T) {
	c, fake := newAvroCodec(t)
	res := &IntentResult{
		IntentID: "i-1", IntentType: "t", Agent: "a", Outcome: OutcomeAnswered, Attempts: 1,
		Timeline: Timeline{ReceivedAt: 1, ResolvedAt: 2, Deadline: 3}, ProgressCount: Ptr(int64(200)),
	}
	b, err := c.Encode("mcp.intent.result", res)
	if err != nil {
		t.Fatal(err)
	}
	oldRes := withoutFields(t, intentResultAvsc, "progress_count")
	var gotRes struct {
		IntentID string `avro:"intent_id"`
		Attempts int32  `avro:"attempts"`
	}
	if err := decodeWithWriter(b[wireHeaderLen:], intentResultAvsc, oldRes, &gotRes); err != nil || gotRes.IntentID != "i-1" || gotRes.Attempts != 1 {
		t.Fatalf("old reader read %+v, %v", gotRes, err)
	}

	pi := &PendingIntent{
		IntentID: "i-2", IntentType: "t", Agent: "a", Payload: "{}", Attempt: 1,
		ProgressSequence: Ptr(int64(12)), ProgressBytes: Ptr(int64(480)), ProgressAgentSequence: Ptr(int64(12)), ProgressCapped: Ptr(true),
	}
	b, err = c.Encode("mcp.router.pending", pi)
	if err != nil {
		t.Fatal(err)
	}
	var back PendingIntent
	if err := c.Decode(b, &back); err != nil || !reflect.DeepEqual(&back, pi) {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	oldPI := withoutFields(t, pendingIntentAvsc, "progress_sequence", "progress_bytes", "progress_agent_sequence", "progress_capped")
	var gotPI struct {
		IntentID string `avro:"intent_id"`
		Attempt  int32  `avro:"attempt"`
	}
	if err := decodeWithWriter(b[wireHeaderLen:], pendingIntentAvsc, oldPI, &gotPI); err != nil || gotPI.IntentID != "i-2" {
		t.Fatalf("old router read %+v, %v", gotPI, err)
	}

	// Written by an old router: the progress fields are nil.
	b = writeWith(t, fake, "mcp.router.pending-value", oldPI, map[string]any{
		"intent_id": "i-3", "intent_type": "t", "agent": "a", "record_ts": int64(0), "received_at": int64(0),
		"dispatched_at": int64(0), "deadline": int64(0), "attempt": int32(1), "cache_key": "", "payload": "{}",
		"context_ref": nil, "session_id": nil, "tenant": nil, "traceparent": nil, "resolved_at": nil, "outcome": nil,
		"queued": nil, "retry_at": nil, "idle_deadline": nil, "context_version": nil, "context_ts": nil,
	})
	var fromOld PendingIntent
	if err := c.Decode(b, &fromOld); err != nil {
		t.Fatal(err)
	}
	if fromOld.ProgressSequence != nil || fromOld.ProgressCapped != nil || fromOld.IntentID != "i-3" {
		t.Fatalf("old pending read as %+v", fromOld)
	}
}

// An IntentProgress whose partial is not JSON is refused on encode and on
// decode.
func TestIntentProgressPartialMustBeJSON(t *testing.T) {
	c := newJSONCodec(t)
	_, err := c.Encode("mcp.intent.progress", &IntentProgress{IntentID: "i", Partial: Ptr(JSON("not json"))})
	if err == nil {
		t.Fatal("encoded a partial that is not JSON")
	}
	ac, _ := newAvroCodec(t)
	_, err = ac.Encode("mcp.agent.response", &AgentResponse{RequestID: "i", Agent: "a", Status: StatusProgress, Partial: Ptr(JSON("{"))})
	if err == nil {
		t.Fatal("encoded an AgentResponse partial that is not JSON")
	}
}
