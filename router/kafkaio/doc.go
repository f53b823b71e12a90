// Package kafkaio connects Switchboard to Kafka with confluent-kafka-go
// (librdkafka). It implements the router's Source and Sink, and gives the rest
// of Switchboard (the API, the command line, the demo agents) the few Kafka
// operations they share: producing with the settings every intent-keyed topic
// needs, reading topics without a consumer group from here to there (Read: a
// Reading says where each partition starts, From, and where reading stops,
// To), reading as a member of a group that commits only what its owner has
// finished with (GroupReader, the Go agent runner's), and creating topics.
// For operators it answers the lag Sampler (LagAdmin: consumer groups,
// committed offsets, extents, the oldest unconsumed record's timestamp) and
// reads the router consumer's own lag from librdkafka's statistics
// (Source.OnConsumerStats).
//
// Every client it makes sends librdkafka's log lines to Settings.Logger
// rather than stderr, and turns the brokers' refusals into one error each
// (errors.go): SASL credentials refused (ErrAuthentication), a broker
// certificate not trusted (ErrUntrustedCertificate), an operation the
// principal has no ACL for (ErrNotAuthorized, naming the operation and the
// resource). A command waiting on a refused client ends at once with that
// line; the router's consumer reports it as it polls on. What ACLs each
// principal needs is config's (router/config/acls.go), not this package's.
//
// Settings the router owns are set here and cannot be overridden through
// kafka.properties: the murmur2_random partitioner (the Java client's, so
// agents in any language land a response on its request's partition number),
// idempotent producers, the range assignor, read_committed, and offsets that
// are stored only when the router says so.
package kafkaio
