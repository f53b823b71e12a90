package kafkaio

import (
	"os"
	"reflect"
	"testing"

	"github.com/switchboard-mcp/switchboard/router/lag"
)

// testdata/consumer-stats.json is librdkafka 2.11's statistics of a
// read_committed consumer on Apache Kafka 4.4, edited: partition 0 read 4 of
// its 6 offsets (five records and a commit marker), partition 1 never read
// with a transaction open past offset 3, and a topic it fetches nothing of.
func TestParseConsumerStats(t *testing.T) {
	b, err := os.ReadFile("testdata/consumer-stats.json")
	if err != nil {
		t.Fatal(err)
	}
	st, err := parseConsumerStats(string(b))
	if err != nil {
		t.Fatal(err)
	}
	want := lag.ConsumerStats{Rebalances: 3, Partitions: []lag.ConsumerPartition{
		{Topic: "mcp.intent.request", Partition: 0, Records: 2},
		{Topic: "mcp.intent.request", Partition: 1, Records: 3},
	}}
	if !reflect.DeepEqual(st, want) {
		t.Fatalf("parsed %+v\nwant   %+v", st, want)
	}
	if _, err := parseConsumerStats("{not json"); err == nil {
		t.Fatal("bad JSON accepted")
	}
}

// BenchmarkParseConsumerStats: one statistics event (12 KB) of a consumer of
// two topics of two partitions. It runs once per router.lag_interval (15s)
// on the poll goroutine; target: under 1 ms, i.e. less than 0.01% of a core,
// and a pause of the poll goroutine well under one Poll's 100 ms.
func BenchmarkParseConsumerStats(b *testing.B) {
	js, err := os.ReadFile("testdata/consumer-stats.json")
	if err != nil {
		b.Fatal(err)
	}
	s := string(js)
	b.ReportAllocs()
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if _, err := parseConsumerStats(s); err != nil {
			b.Fatal(err)
		}
	}
}
