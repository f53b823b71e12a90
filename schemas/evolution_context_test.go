package schemas

import (
	"reflect"
	"slices"
	"testing"

	"github.com/hamba/avro/v2"
)

// The context fields (AgentRequest.context_status, Timeline.context_version
// and context_ts, PendingIntent.context_version and context_ts) were added
// with null defaults: records written before them still read, and readers
// from before them skip them.

// withoutFields returns avsc without the named top-level fields.
func withoutFields(t *testing.T, avsc string, names ...string) string {
	t.Helper()
	return evolve(t, avsc, func(m map[string]any) {
		for _, n := range names {
			i := fieldIndex(t, m, n)
			m["fields"] = slices.Delete(fieldsOf(m), i, i+1)
		}
	})
}

func TestEvolutionContextFieldsOldWriter(t *testing.T) {
	c, fake := newAvroCodec(t)

	old := withoutFields(t, agentRequestAvsc, "context_status")
	b := writeWith(t, fake, "mcp.agent.a.request-value", old, map[string]any{
		"intent_id": "i-1", "intent_type": "t", "agent": "a", "payload": "{}", "context_ref": nil, "context": nil,
		"deadline": int64(5), "attempt": int32(1), "session_id": nil, "tenant": nil, "traceparent": nil,
	})
	got := AgentRequest{ContextStatus: Ptr(ContextStale)}
	if err := c.Decode(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.ContextStatus != nil || got.IntentID != "i-1" || got.Deadline != 5 {
		t.Fatalf("old AgentRequest read as %+v", got)
	}

	old = withoutFields(t, pendingIntentAvsc, "context_version", "context_ts")
	pi := PendingIntent{IntentID: "i-2", IntentType: "t", Agent: "a", Payload: "{}", Attempt: 1}
	b = writeWith(t, fake, "mcp.router.pending-value", old, map[string]any{
		"intent_id": "i-2", "intent_type": "t", "agent": "a", "record_ts": int64(0), "received_at": int64(0),
		"dispatched_at": int64(0), "deadline": int64(0), "attempt": int32(1), "cache_key": "", "payload": "{}",
		"context_ref": nil, "session_id": nil, "tenant": nil, "traceparent": nil, "resolved_at": nil, "outcome": nil,
	})
	var gotPI PendingIntent
	if err := c.Decode(b, &gotPI); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotPI, pi) {
		t.Fatalf("old PendingIntent read as %+v, want %+v", gotPI, pi)
	}
}

// An old reader of IntentResult (Timeline without the context fields) reads
// what the router writes now.
func TestEvolutionContextFieldsOldReader(t *testing.T) {
	c, _ := newAvroCodec(t)
	res := &IntentResult{
		IntentID: "i-1", IntentType: "t", Agent: "a", Outcome: OutcomeAnswered, Attempts: 1,
		Timeline: Timeline{ReceivedAt: 1, ResolvedAt: 2, Deadline: 3, ContextVersion: Ptr(int64(7)), ContextTs: Ptr(int64(4))},
	}
	b, err := c.Encode("mcp.intent.result", res)
	if err != nil {
		t.Fatal(err)
	}
	old := evolve(t, intentResultAvsc, func(m map[string]any) {
		tl := fieldsOf(m)[fieldIndex(t, m, "timeline")].(map[string]any)["type"].(map[string]any)
		fieldIndexIn := func(name string) int { return fieldIndex(t, tl, name) }
		tl["fields"] = slices.Delete(fieldsOf(tl), fieldIndexIn("context_version"), fieldIndexIn("context_version")+2)
	})
	type oldTimeline struct {
		ReceivedAt   int64  `avro:"received_at"`
		DispatchedAt *int64 `avro:"dispatched_at"`
		AnsweredAt   *int64 `avro:"answered_at"`
		ResolvedAt   int64  `avro:"resolved_at"`
		Deadline     int64  `avro:"deadline"`
	}
	var got struct {
		IntentID string      `avro:"intent_id"`
		Timeline oldTimeline `avro:"timeline"`
	}
	if err := decodeWithWriter(b[wireHeaderLen:], intentResultAvsc, old, &got); err != nil {
		t.Fatal(err)
	}
	if got.IntentID != "i-1" || got.Timeline.Deadline != 3 || got.Timeline.ResolvedAt != 2 {
		t.Fatalf("old reader read %+v", got)
	}
}

// decodeWithWriter decodes an Avro body written with writerText as a reader
// with readerText would: what an older consumer does.
func decodeWithWriter(body []byte, writerText, readerText string, v any) error {
	writer, err := avro.ParseWithCache(writerText, "", &avro.SchemaCache{})
	if err != nil {
		return err
	}
	reader, err := avro.ParseWithCache(readerText, "", &avro.SchemaCache{})
	if err != nil {
		return err
	}
	resolved, err := avro.NewSchemaCompatibility().Resolve(reader, writer)
	if err != nil {
		return err
	}
	return avro.Unmarshal(resolved, body, v)
}
