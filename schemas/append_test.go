package schemas

import (
	"bytes"
	"errors"
	"reflect"
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
			want := mustEncode(t, c.codec, c.enc, "t", r)
			dst := append(make([]byte, 0, len(prefix)+SizeHint(r)), prefix...)
			got, err := c.codec.AppendEncodeAs(dst, c.enc, "t", r)
			if err != nil {
				t.Fatalf("%s %T: %v", c.name, r, err)
			}
			if !bytes.Equal(got[:len(prefix)], prefix) || !sameRecord(t, c.codec, got[len(prefix):], want, r) {
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

// sameRecord reports whether got and want are the same encoding of r: equal
// bytes, or, where a record holds a map (context features, a snapshot's
// features), which Avro writes in Go's map order, equal once decoded.
func sameRecord(t *testing.T, c *Codec, got, want []byte, r Record) bool {
	t.Helper()
	if bytes.Equal(got, want) {
		return true
	}
	if len(got) != len(want) {
		return false
	}
	g, w := reflect.New(reflect.TypeOf(r).Elem()).Interface().(Record), reflect.New(reflect.TypeOf(r).Elem()).Interface().(Record)
	if err := c.Decode(got, g); err != nil {
		t.Fatalf("%T: decoding what was appended: %v", r, err)
	}
	if err := c.Decode(want, w); err != nil {
		t.Fatalf("%T: decoding what EncodeAs wrote: %v", r, err)
	}
	return reflect.DeepEqual(g, w)
}

// TestAppendEncodeDecoded: for records whose documents are well-formed it
// writes what AppendEncodeAs writes, in both encodings and for every record
// type; it does not validate the documents again (a broken one, which
// AppendEncodeAs refuses, passes: the caller vouched for it), and it still
// refuses enum symbols the schema does not know.
func TestAppendEncodeDecoded(t *testing.T) {
	avroCodec, _ := newAvroCodec(t)
	jsonCodec := newJSONCodec(t)
	for _, c := range []struct {
		name  string
		codec *Codec
		enc   Encoding
	}{{"json", jsonCodec, EncodingJSON}, {"avro", avroCodec, EncodingAvro}} {
		for _, r := range sampleRecords() {
			want, err := c.codec.AppendEncodeAs(nil, c.enc, "t", r)
			if err != nil {
				t.Fatalf("%s %T: %v", c.name, r, err)
			}
			got, err := c.codec.AppendEncodeDecoded(nil, c.enc, "t", r)
			if err != nil || !sameRecord(t, c.codec, got, want, r) {
				t.Errorf("%s %T: %q, %v; want %q", c.name, r, got, err, want)
			}
		}
	}
	broken := &AgentRequest{IntentID: "i", IntentType: "t", Agent: "a", Payload: `{"broken"`}
	if _, err := jsonCodec.AppendEncodeAs(nil, EncodingJSON, "t", broken); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("AppendEncodeAs of a broken payload: %v, want ErrInvalidRecord", err)
	}
	if _, err := jsonCodec.AppendEncodeDecoded(nil, EncodingJSON, "t", broken); err != nil {
		t.Errorf("AppendEncodeDecoded validated the payload again: %v", err)
	}
	for _, r := range []Record{
		&AgentResponse{RequestID: "i", Agent: "a", Status: "maybe"},
		&IntentResult{IntentID: "i", IntentType: "t", Outcome: "perhaps"},
		&IntentTimeout{IntentID: "i", IntentType: "t", Reason: "whim", Fallback: FallbackNone},
	} {
		if _, err := jsonCodec.AppendEncodeDecoded(nil, EncodingJSON, "t", r); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%T with an unknown symbol: %v, want ErrInvalidRecord", r, err)
		}
	}
}
