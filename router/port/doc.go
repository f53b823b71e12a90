// Package port holds what the engine and its Kafka adapters exchange: the
// records the router reads and writes (Record, Output, Header and the header
// names Switchboard gives them), the partitions it owns (TopicPartition and
// the Source's events), and the ports themselves: Source, Sink, TxSink and
// TxRegistrar, which router/kafkaio implements with confluent-kafka-go and
// router/routertest in memory, and the Restorer and FallbackFeed readers.
//
// It imports nothing of the engine, so that the adapters (router/kafkaio,
// router/deadletter) and the Go client for agents and publishers
// (intents/client) describe Kafka records without importing the router.
//
// It does not own the engine's behaviour (router), the wire codec
// (schemas) or any Kafka client (router/kafkaio).
package port
