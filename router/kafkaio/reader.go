package kafkaio

import "github.com/confluentinc/confluent-kafka-go/v2/kafka"

// newReader returns the consumer Read (outside a group) and the topic
// descriptions read with: it is assigned partitions, never joins a group (librdkafka needs a
// group id all the same: "switchboard-<name>-<random>") and commits nothing,
// and it reads committed records only. eof asks for end-of-partition events;
// extra adds settings of the caller's.
func newReader(s Settings, name string, eof bool, extra kafka.ConfigMap) (*consumer, error) {
	owned := kafka.ConfigMap{
		"group.id":             "switchboard-" + name + "-" + tailID(),
		"enable.auto.commit":   false,
		"isolation.level":      "read_committed",
		"enable.partition.eof": eof,
	}
	for k, v := range extra {
		owned[k] = v
	}
	return newConsumer(s, "consumer", owned)
}
