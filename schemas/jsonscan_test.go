package schemas

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// TestFastDecodeMatchesEncodingJSON: whatever the fast path decodes, it
// decodes to what encoding/json does, over records with every field set or
// null or absent, duplicates, whitespace, nested documents and the inputs
// it must leave to encoding/json.
func TestFastDecodeMatchesEncodingJSON(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	strs := []string{`""`, `"x"`, `"ünï ✓"`, `"a\"b"`, `"\u00e9"`, `null`, `"bad` + "\xff" + `"`}
	ints := []string{`0`, `-12`, `1800000000000`, `null`, `1.5`, `1e3`, `"7"`, `99999999999999999999`, `2147483648`}
	docs := []string{`{}`, `{"a":[1,{"b":"}"}],"c":"\"]"}`, `[ 1 , 2 ]`, `"s"`, `12`, `true`, `null`, `{ "x" : { } }`}
	reqFields := map[string][]string{
		"intent_id": strs, "intent_type": strs, "target_agent": strs, "context_ref": strs, "timeout_ms": ints,
		"payload": docs, "session_id": strs, "tenant": strs, "traceparent": strs, "created_at": ints, "Intent_ID": strs, "extra": docs,
	}
	respFields := map[string][]string{
		"request_id": strs, "agent": strs, "status": {`"ok"`, `"error"`, `"weird"`, `null`, `""`}, "answer": docs,
		"produced_at": ints, "attempt": ints, "error": {`{"code":"c","message":"m","retryable":true}`, `null`}, "other": strs,
	}
	gen := func(fields map[string][]string) string {
		keys := make([]string, 0, len(fields))
		for k := range fields {
			keys = append(keys, k)
		}
		var parts []string
		for range rnd.IntN(9) {
			k := keys[rnd.IntN(len(keys))]
			vs := fields[k]
			sp := []string{"", " ", "\n\t"}[rnd.IntN(3)]
			parts = append(parts, sp+`"`+k+`"`+sp+":"+sp+vs[rnd.IntN(len(vs))]+sp)
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	fast := 0
	for range 20000 {
		for _, c := range []struct {
			in  string
			new func() Record
		}{
			{gen(reqFields), func() Record { return &IntentRequest{} }},
			{gen(respFields), func() Record { return &AgentResponse{} }},
		} {
			if !json.Valid([]byte(c.in)) {
				continue
			}
			got, want := c.new(), c.new()
			if !decodeFastJSON([]byte(c.in), got) {
				continue
			}
			fast++
			if err := json.Unmarshal([]byte(c.in), want); err != nil {
				t.Fatalf("%s: the fast path decoded what encoding/json refuses (%v)", c.in, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s:\n fast %+v\n json %+v", c.in, got, want)
			}
		}
	}
	if fast < 5000 {
		t.Fatalf("only %d inputs took the fast path", fast)
	}
}
