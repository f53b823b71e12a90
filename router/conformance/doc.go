// Package conformance is the round-trip suite every Kafka-protocol broker
// Switchboard supports must pass: the same scenarios run against the embedded
// broker (go test) and against Apache Kafka (go test -tags integration with
// KAFKA_BOOTSTRAP), each with a Schema Registry (Avro on the wire) and without
// one (JSON).
//
// The router under test runs on a fake clock started at the real time, so
// deadlines derived from the broker's record timestamps are honoured exactly
// and timeouts fire when the test advances the clock, never by waiting.
package conformance
