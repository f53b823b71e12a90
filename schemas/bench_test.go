package schemas

import (
	"testing"
)

// benchRecords are an IntentRequest and an IntentResult, each with a ~200-byte
// JSON payload or answer.
func benchRecords() []Record {
	recs := sampleRecords()
	return []Record{recs[0], recs[7]}
}

func recordName(r Record) string { return SchemaName(r)[len("mcp.switchboard."):] }

func BenchmarkEncode(b *testing.B) {
	c, _ := newInProcessCodec(b)
	for _, r := range benchRecords() {
		for _, enc := range []Encoding{EncodingAvro, EncodingJSON} {
			b.Run(recordName(r)+"/"+enc.String(), func(b *testing.B) {
				out := mustEncode(b, c, enc, "bench", r) // registers
				b.SetBytes(int64(len(out)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.EncodeAs(enc, "bench", r); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	c, _ := newInProcessCodec(b)
	for _, r := range benchRecords() {
		for _, enc := range []Encoding{EncodingAvro, EncodingJSON} {
			b.Run(recordName(r)+"/"+enc.String(), func(b *testing.B) {
				data := mustEncode(b, c, enc, "bench", r)
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				for b.Loop() {
					if err := c.Decode(data, newZero(r)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
