package kafkaio

import (
	"runtime"
	"testing"
)

// A producer's Go channels are small: confluent-kafka-go's defaults (a
// million slots each) allocated 24 MiB per producer, 94 MB of an idle
// 'serve' heap with its four producers and admin clients.
func TestProducerChannelsAreSmall(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	p, w, err := newProducer(Settings{Bootstrap: "127.0.0.1:1"}, "producer", producerSettings(Settings{}))
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	p.Close()
	<-w.done
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Fatalf("creating a producer allocated %d bytes, want under 4 MiB", got)
	}
	a, err := newAdmin(Settings{Bootstrap: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&before)
	a.Close()
	if got := before.TotalAlloc - after.TotalAlloc; got > 4<<20 {
		t.Fatalf("creating an admin client allocated %d bytes, want under 4 MiB", got)
	}
}
