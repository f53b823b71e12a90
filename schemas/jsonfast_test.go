package schemas

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestFastJSONMatchesEncodingJSON: the hot records' appenders write exactly
// what encoding/json (SetEscapeHTML(false), as the codec used it) writes,
// over every optional field set or not and strings that need escaping.
func TestFastJSONMatchesEncodingJSON(t *testing.T) {
	strs := []string{"", "plain", `q"uote`, `back\slash`, "ctl\x00\x01\x1f\b\f\n\r\t", "<html>&amp;", "ünïcødé ✓", "bad\xffutf8\xc3", "sep\u2028\u2029end", "\x7f del"}
	docs := []JSON{"", `{"a":1}`, `{ "a" : [1, 2,  3],` + "\n" + `"b":"x y" }`, `"s"`, `null`, `[{"k":"v\"w"}]`, `12.5e3`}
	rnd := rand.New(rand.NewPCG(1, 2))
	str := func() string { return strs[rnd.IntN(len(strs))] }
	opt := func() *string {
		if rnd.IntN(2) == 0 {
			return nil
		}
		s := str()
		return &s
	}
	optInt := func() *int64 {
		if rnd.IntN(2) == 0 {
			return nil
		}
		n := rnd.Int64N(1<<50) - 1<<49
		return &n
	}
	doc := func() JSON { return docs[rnd.IntN(len(docs))] }
	var recs []Record
	for range 500 {
		cs := ContextStatus(str())
		ar := &AgentRequest{
			IntentID: str(), IntentType: str(), Agent: str(), Payload: doc(), ContextRef: opt(), Deadline: rnd.Int64(), Attempt: rnd.Int32(),
			SessionID: opt(), Tenant: opt(), Traceparent: opt(),
		}
		if rnd.IntN(2) == 0 {
			ar.ContextStatus = &cs
		}
		pi := &PendingIntent{
			IntentID: str(), IntentType: str(), Agent: str(), RecordTs: rnd.Int64(), ReceivedAt: -rnd.Int64(), DispatchedAt: 0, Deadline: rnd.Int64(),
			Attempt: -rnd.Int32(), CacheKey: str(), Payload: doc(), ContextRef: opt(), SessionID: opt(), Tenant: opt(), Traceparent: opt(),
			ResolvedAt: optInt(), Outcome: opt(), RetryAt: optInt(), IdleDeadline: optInt(), ContextVersion: optInt(), ContextTs: optInt(),
		}
		if rnd.IntN(2) == 0 {
			q := rnd.IntN(2) == 0
			pi.Queued = &q
		}
		ir := &IntentResult{
			IntentID: str(), IntentType: str(), Agent: str(), Outcome: Outcome(str()), SessionID: opt(), Tenant: opt(), Attempts: rnd.Int32(),
			Timeline: Timeline{ReceivedAt: rnd.Int64(), DispatchedAt: optInt(), AnsweredAt: optInt(), ResolvedAt: rnd.Int64(), Deadline: rnd.Int64(), ContextVersion: optInt(), ContextTs: optInt()},
		}
		if rnd.IntN(2) == 0 {
			a := doc()
			ir.Answer = &a
		}
		if rnd.IntN(2) == 0 {
			ir.Error = &ErrorInfo{Code: str(), Message: str(), Retryable: rnd.IntN(2) == 0}
		}
		recs = append(recs, ar, pi, ir)
	}
	for i, r := range recs {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
		got, ok := appendFastJSON(nil, r)
		if !ok {
			t.Fatalf("record %d (%T) not covered", i, r)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("record %d (%T):\n got %s\nwant %s", i, r, got, want)
		}
	}
	// An attached context snapshot goes through encoding/json.
	if _, ok := appendFastJSON(nil, &AgentRequest{Context: &ContextSnapshot{}}); ok {
		t.Fatal("an AgentRequest with a context was taken by the fast path")
	}
}
