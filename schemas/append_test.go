package schemas

import (
	"bytes"
	"errors"
	"testing"
)

// TestAppendEncodeAs: appending writes exactly what EncodeAs writes, after
// what dst held, in both encodings and for every record type; in place
// when dst has SizeHint's room; and an error leaves dst as it was.
func TestAppendEncodeAs(t *testing.T) {
	avroCodec, _ := newAvroCodec(t)
	jsonCodec := newJSONCodec(t)
	prefix := []byte("prefix")
	for _, c := range []struct {
		name  string
		codec *Codec
		enc   Encoding
	}{{"json", jsonCodec, EncodingJSON}, {"avro", avroCodec, EncodingAvro}} {
		for _, r := range sampleRecords() {
			if _, ok := r.(*ContextSnapshot); ok && c.enc == EncodingAvro {
				continue // a map: Avro writes its entries in Go's map order, which varies
			}
			want := mustEncode(t, c.codec, c.enc, "t", r)
			dst := append(make([]byte, 0, len(prefix)+SizeHint(r)), prefix...)
			got, err := c.codec.AppendEncodeAs(dst, c.enc, "t", r)
			if err != nil {
				t.Fatalf("%s %T: %v", c.name, r, err)
			}
			if !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], want) {
				t.Errorf("%s %T: appended %q after %q, want %q", c.name, r, got[len(prefix):], got[:len(prefix)], want)
			}
			if c.enc == EncodingJSON && fast(r) && &got[0] != &dst[0] && len(want) <= SizeHint(r) {
				t.Errorf("%s %T: not written in place", c.name, r)
			}
		}
	}
	bad := &AgentRequest{IntentID: "i", IntentType: "t", Agent: "a", Payload: `{"broken"`}
	dst := []byte("kept")
	got, err := jsonCodec.AppendEncodeAs(dst, EncodingJSON, "t", bad)
	if !errors.Is(err, ErrInvalidRecord) || string(got) != "kept" {
		t.Errorf("invalid record: got %q, %v; want %q, ErrInvalidRecord", got, err, "kept")
	}
	small := newJSONCodec(t, WithMaxRecordBytes(16))
	got, err = small.AppendEncodeAs(dst, EncodingJSON, "t", &AgentRequest{IntentID: "i", IntentType: "t", Agent: "a", Payload: `{"a":"0123456789"}`})
	if !errors.Is(err, ErrTooLarge) || string(got) != "kept" {
		t.Errorf("too large: got %q, %v; want %q, ErrTooLarge", got, err, "kept")
	}
}
