package router

import (
	"bytes"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// TestArena: the hot path's outputs and values share chunks, and a sink can
// neither see nor overwrite another output through what it was given: each
// value's capacity ends with it, each Output is its own, and a large value
// has its own allocation.
func TestArena(t *testing.T) {
	codec, err := schemas.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	var a arena
	var values [][]byte
	var outs []*port.Output
	for i := range 3 * outputChunk {
		r := &schemas.PendingIntent{IntentID: "i-" + strings.Repeat("x", i%7), IntentType: "echo", Agent: "echo", Payload: `{"q":1}`}
		v, err := a.encode(codec, schemas.EncodingDefault, "pending", r)
		if err != nil {
			t.Fatal(err)
		}
		want, err := codec.Encode("pending", r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(v, want) || cap(v) != len(v) {
			t.Fatalf("value %d: %q (cap %d), want %q with its capacity ending with it", i, v, cap(v), want)
		}
		values = append(values, v)
		outs = append(outs, a.output(port.Output{Topic: "pending", Value: v}))
	}
	// A sink that appends to a value gets a copy, never the next value.
	before := bytes.Clone(values[1])
	_ = append(values[0], "overwrite"...)
	if !bytes.Equal(values[1], before) {
		t.Fatalf("appending to one value changed the next: %q, was %q", values[1], before)
	}
	seen := map[*port.Output]bool{}
	for i, o := range outs {
		if seen[o] || !bytes.Equal(o.Value, values[i]) {
			t.Fatalf("output %d shared or changed: %q", i, o.Value)
		}
		seen[o] = true
	}
	if &values[0][0] == &values[len(values)-1][0] || cap(a.values) == 0 {
		t.Fatal("values were not written into chunks")
	}
	big := &schemas.PendingIntent{IntentID: "big", IntentType: "echo", Agent: "echo", Payload: schemas.JSON(`"` + strings.Repeat("b", valueChunk) + `"`)}
	chunk := a.values
	v, err := a.encode(codec, schemas.EncodingDefault, "pending", big)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.values) != len(chunk) || len(v) <= valueChunk {
		t.Fatal("a value larger than a quarter chunk went into the chunk")
	}
}
