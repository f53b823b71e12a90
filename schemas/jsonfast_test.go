package schemas

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
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

// TestFastJSONCoversEveryField: with every field of the hot records set
// (found by reflection, so a field added to a record later is set too), the
// appenders still write what encoding/json writes. A field an appender does
// not know about fails here, not on the wire.
func TestFastJSONCoversEveryField(t *testing.T) {
	for _, r := range []Record{&AgentRequest{}, &PendingIntent{}, &IntentResult{}} {
		fillEveryField(reflect.ValueOf(r).Elem())
		if ar, ok := r.(*AgentRequest); ok {
			ar.Context = nil // an attached snapshot takes encoding/json's path
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
		got, ok := appendFastJSON(nil, r)
		if !ok {
			t.Fatalf("%T not covered", r)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%T with every field set:\n got %s\nwant %s", r, got, want)
		}
	}
}

func fillEveryField(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillEveryField(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			fillEveryField(v.Field(i))
		}
	case reflect.String:
		if v.Type() == reflect.TypeFor[JSON]() {
			v.SetString(`{"a":1}`)
		} else {
			v.SetString("x")
		}
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
	}
}
