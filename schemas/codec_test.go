package schemas

import (
	"fmt"
	"reflect"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	c, _ := newAvroCodec(t)
	for _, enc := range []Encoding{EncodingJSON, EncodingAvro} {
		for i, r := range sampleRecords() {
			t.Run(fmt.Sprintf("%v/%d-%T", enc, i, r), func(t *testing.T) {
				b := mustEncode(t, c, enc, "mcp.test", r)
				got := newZero(r)
				if err := c.Decode(b, got); err != nil {
					t.Fatalf("decode: %v\n%q", err, b)
				}
				if !reflect.DeepEqual(got, r) {
					t.Fatalf("round trip changed the record:\n got %+v\nwant %+v", got, r)
				}
			})
		}
	}
}
