package schemas

import (
	"encoding/binary"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// Schema evolution through the registry: a writer with another version of a
// schema registers it under the topic's subject and writes records with its
// id; our codec reads them with its embedded schema.

// evolve returns avsc with edit applied to its top-level JSON object.
func evolve(t *testing.T, avsc string, edit func(schema map[string]any)) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(avsc), &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func fieldsOf(m map[string]any) []any { return m["fields"].([]any) }

func fieldIndex(t *testing.T, m map[string]any, name string) int {
	t.Helper()
	for i, f := range fieldsOf(m) {
		if f.(map[string]any)["name"] == name {
			return i
		}
	}
	t.Fatalf("no field %s", name)
	return -1
}

// writeWith registers schema text under subject in fake and returns v
// encoded with it, in the wire format.
func writeWith(t testing.TB, fake *srfake.Registry, subject, text string, v any) []byte {
	t.Helper()
	id, _, err := fake.RegisterSchema(subject, sr.Schema{Schema: text})
	if err != nil {
		t.Fatal(err)
	}
	s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		t.Fatal(err)
	}
	body, err := avro.Marshal(s, v)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, wireHeaderLen, wireHeaderLen+len(body))
	binary.BigEndian.PutUint32(out[1:], uint32(id))
	return append(out, body...)
}

// intentRequestV2 is IntentRequest as a newer writer has it: a priority field
// after the payload and a tags array at the end.
type intentRequestV2 struct {
	IntentID    string   `avro:"intent_id"`
	IntentType  string   `avro:"intent_type"`
	TargetAgent *string  `avro:"target_agent"`
	ContextRef  *string  `avro:"context_ref"`
	TimeoutMs   *int64   `avro:"timeout_ms"`
	Payload     string   `avro:"payload"`
	Priority    *int32   `avro:"priority"`
	SessionID   *string  `avro:"session_id"`
	Tenant      *string  `avro:"tenant"`
	Traceparent *string  `avro:"traceparent"`
	CreatedAt   *int64   `avro:"created_at"`
	Tags        []string `avro:"tags"`
}

// (a) An old reader (our schema, without the new fields) reads what a new
// writer wrote: the new fields are skipped.
func TestEvolutionNewWriterAddsFields(t *testing.T) {
	c, fake := newAvroCodec(t)
	text := evolve(t, intentRequestAvsc, func(m map[string]any) {
		i := fieldIndex(t, m, "payload") + 1
		m["fields"] = slices.Insert(fieldsOf(m), i, any(map[string]any{
			"name": "priority", "type": []any{"null", "int"}, "default": nil,
		}))
		m["fields"] = append(fieldsOf(m), map[string]any{
			"name": "tags", "type": map[string]any{"type": "array", "items": "string"}, "default": []any{},
		})
	})
	v2 := intentRequestV2{
		IntentID: "i-1", IntentType: "payments.refund", Payload: `{"amount":12}`,
		Priority: Ptr(int32(3)), Tenant: Ptr("acme"), CreatedAt: Ptr(int64(99)),
		Tags: []string{"vip", "eu"},
	}
	b := writeWith(t, fake, "mcp.intent.request-value", text, v2)

	var got IntentRequest
	if err := c.Decode(b, &got); err != nil {
		t.Fatal(err)
	}
	want := IntentRequest{IntentID: "i-1", IntentType: "payments.refund", Payload: `{"amount":12}`, Tenant: Ptr("acme"), CreatedAt: Ptr(int64(99))}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

// agentResponseV0 is AgentResponse as an older writer had it: no error and
// no produced_at.
type agentResponseV0 struct {
	RequestID string  `avro:"request_id"`
	Agent     string  `avro:"agent"`
	Status    string  `avro:"status"`
	Answer    *string `avro:"answer"`
}

// (b) Our reader has fields an old writer lacks: they get their defaults.
func TestEvolutionOldWriterLacksFields(t *testing.T) {
	c, fake := newAvroCodec(t)
	text := evolve(t, agentResponseAvsc, func(m map[string]any) {
		fs := fieldsOf(m)
		fs = slices.Delete(fs, fieldIndex(t, m, "error"), fieldIndex(t, m, "error")+1)
		m["fields"] = fs
		m["fields"] = slices.Delete(fs, fieldIndex(t, m, "produced_at"), fieldIndex(t, m, "produced_at")+1)
	})
	if strings.Contains(text, "produced_at") || strings.Contains(text, "ErrorInfo") {
		t.Fatalf("old schema still has the new fields: %s", text)
	}
	b := writeWith(t, fake, "mcp.agent.response-value", text, agentResponseV0{
		RequestID: "i-1", Agent: "a", Status: "ok", Answer: Ptr(`{"x":1}`),
	})
	got := AgentResponse{Error: &ErrorInfo{Code: "stale"}, ProducedAt: Ptr(int64(5))}
	if err := c.Decode(b, &got); err != nil {
		t.Fatal(err)
	}
	want := AgentResponse{RequestID: "i-1", Agent: "a", Status: StatusOK, Answer: Ptr(JSON(`{"x":1}`))}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

// (c) A writer whose enum has a symbol our reader does not know: it decodes
// as "unknown"; symbols both know decode by name, not position.
func TestEvolutionUnknownEnumSymbol(t *testing.T) {
	c, fake := newAvroCodec(t)
	text := evolve(t, agentResponseAvsc, func(m map[string]any) {
		status := fieldsOf(m)[fieldIndex(t, m, "status")].(map[string]any)["type"].(map[string]any)
		status["symbols"] = []any{"ok", "partial", "error", "progress", "unknown"}
	})
	for _, tc := range []struct {
		written string
		want    Status
	}{
		{"partial", StatusUnknown},
		{"error", StatusError},
		{"progress", StatusProgress},
		{"ok", StatusOK},
	} {
		b := writeWith(t, fake, "mcp.agent.response-value", text, AgentResponse{RequestID: "i", Agent: "a", Status: Status(tc.written)})
		var got AgentResponse
		if err := c.Decode(b, &got); err != nil {
			t.Fatalf("%s: %v", tc.written, err)
		}
		if got.Status != tc.want {
			t.Errorf("written %q, read %q, want %q", tc.written, got.Status, tc.want)
		}
	}

	// The same in a nested position, with two enums in one record.
	text = evolve(t, intentTimeoutAvsc, func(m map[string]any) {
		reason := fieldsOf(m)[fieldIndex(t, m, "reason")].(map[string]any)["type"].(map[string]any)
		reason["symbols"] = append(reason["symbols"].([]any), "quota")
	})
	b := writeWith(t, fake, "mcp.intent.timeout-value", text, IntentTimeout{IntentID: "i", Reason: "quota", Fallback: FallbackStatic})
	var to IntentTimeout
	if err := c.Decode(b, &to); err != nil {
		t.Fatal(err)
	}
	if to.Reason != ReasonUnknown || to.Fallback != FallbackStatic {
		t.Errorf("read %q/%q, want unknown/static", to.Reason, to.Fallback)
	}
}

// A writer schema that drops a field our reader requires (no default) cannot
// be read: incompatible_schema, not a panic or a half-filled record.
func TestEvolutionIncompatible(t *testing.T) {
	c, fake := newAvroCodec(t)
	text := evolve(t, intentRequestAvsc, func(m map[string]any) {
		m["fields"] = slices.Delete(fieldsOf(m), fieldIndex(t, m, "intent_type"), fieldIndex(t, m, "intent_type")+1)
	})
	b := writeWith(t, fake, "mcp.intent.request-value", text, map[string]any{
		"intent_id": "i", "target_agent": nil, "context_ref": nil, "timeout_ms": nil, "payload": "{}",
		"session_id": nil, "tenant": nil, "traceparent": nil, "created_at": nil,
	})
	err := c.Decode(b, new(IntentRequest))
	if ErrorClass(err) != ClassIncompatibleSchema {
		t.Fatalf("class %q: %v", ErrorClass(err), err)
	}
}

// Timeline.trace_id was added with a null default (issue 20): a result
// written before it reads with no trace id, and a reader from before it
// skips it.
func TestEvolutionTimelineTraceID(t *testing.T) {
	c, fake := newAvroCodec(t)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	dropTraceID := func(m map[string]any) {
		tl := fieldsOf(m)[fieldIndex(t, m, "timeline")].(map[string]any)["type"].(map[string]any)
		i := fieldIndex(t, tl, "trace_id")
		tl["fields"] = slices.Delete(fieldsOf(tl), i, i+1)
	}
	old := evolve(t, intentResultAvsc, dropTraceID)

	// An old writer: no trace id.
	b := writeWith(t, fake, "mcp.intent.result-value", old, map[string]any{
		"intent_id": "i-1", "intent_type": "t", "agent": "a", "outcome": "answered", "answer": nil, "error": nil,
		"session_id": nil, "tenant": nil, "attempts": int32(1), "progress_count": nil,
		"timeline": map[string]any{
			"received_at": int64(1), "dispatched_at": nil, "answered_at": nil,
			"resolved_at": int64(2), "deadline": int64(3), "context_version": nil, "context_ts": nil,
		},
	})
	got := IntentResult{Timeline: Timeline{TraceID: Ptr("stale")}}
	if err := c.Decode(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Timeline.TraceID != nil || got.IntentID != "i-1" || got.Timeline.Deadline != 3 {
		t.Fatalf("an old result read as %+v", got)
	}

	// An old reader: skips it, and reads what follows the timeline.
	res := &IntentResult{
		IntentID: "i-2", IntentType: "t", Agent: "a", Outcome: OutcomeAnswered, Attempts: 1,
		Timeline:      Timeline{ReceivedAt: 1, ResolvedAt: 2, Deadline: 3, TraceID: Ptr(traceID)},
		ProgressCount: Ptr(int64(4)),
	}
	nb, err := c.Encode("mcp.intent.result", res)
	if err != nil {
		t.Fatal(err)
	}
	var oldGot struct {
		IntentID string `avro:"intent_id"`
		Timeline struct {
			Deadline int64 `avro:"deadline"`
		} `avro:"timeline"`
		ProgressCount *int64 `avro:"progress_count"`
	}
	if err := decodeWithWriter(nb[wireHeaderLen:], intentResultAvsc, old, &oldGot); err != nil {
		t.Fatal(err)
	}
	if oldGot.IntentID != "i-2" || oldGot.Timeline.Deadline != 3 || oldGot.ProgressCount == nil || *oldGot.ProgressCount != 4 {
		t.Fatalf("an old reader read %+v", oldGot)
	}

	// And the new reader reads it back, in Avro and in JSON.
	var back IntentResult
	if err := c.Decode(nb, &back); err != nil || back.Timeline.TraceID == nil || *back.Timeline.TraceID != traceID {
		t.Fatalf("read back %+v, %v", back.Timeline, err)
	}
	j, err := c.EncodeAs(EncodingJSON, "mcp.intent.result", res)
	if err != nil || !strings.Contains(string(j), `"trace_id":"`+traceID+`"`) {
		t.Fatalf("JSON %s, %v", j, err)
	}
}
