package kafkaio

import "github.com/confluentinc/confluent-kafka-go/v2/kafka"

// Channel sizes of a producer (and of an admin client, which librdkafka runs
// as a producer). confluent-kafka-go makes each producer two Go channels of a
// million slots by default: Events() (16 bytes a slot, 16 MiB) and
// ProduceChannel() (8 bytes a slot, 8 MiB), allocated at once. 'serve' has
// four producers (two transactional lanes, the API's publisher, the lag
// admin): 94 MB of the idle Go heap, counted against the soft memory limit
// and, as delivery reports cycle through the Events() ring, touched and
// resident over time (issue 13, heap profile in BENCHMARKS.md).
//
// Nothing here uses ProduceChannel(). Events() is read by one goroutine per
// producer that only counts or forwards delivery reports; when it is full
// the client's poller waits and librdkafka keeps the reports in its own
// queue, so a smaller channel slows nothing that was not already waiting.
const (
	producerEventsChannelSize  = 16384 // 256 KiB
	producerProduceChannelSize = 1     // unused
)

// withSmallChannels sizes a producer's Go channels (see above).
func withSmallChannels(cm *kafka.ConfigMap) {
	(*cm)["go.events.channel.size"] = producerEventsChannelSize
	(*cm)["go.produce.channel.size"] = producerProduceChannelSize
}
