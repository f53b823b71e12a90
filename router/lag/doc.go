// Package lag owns Switchboard's consumer-lag figures: how far each agent's
// consumer group is behind its request topic (AgentRequests not yet
// consumed, and the age of the oldest of them), sampled on an interval by a
// Sampler, and how far the router's own consumer is behind on each of its
// partitions, from the Kafka client's statistics (ConsumerLag). Both are
// Prometheus collectors; the Sampler also answers per agent for GET
// /v1/agents. The HangWatch (hanging.go) finds hanging transactions: a
// partition whose last stable offset is stuck behind its high watermark;
// given a TxnAborter it ends them itself when nothing says they may be
// live (abort.go holds that policy; router/kafkaio's TxnAborter the wire).
//
// It does not talk to Kafka itself: the Sampler asks a small Admin
// interface, implemented with confluent-kafka-go's admin client in
// router/kafkaio (LagAdmin), which also parses librdkafka's statistics into
// ConsumerStats. It does not alert: deploy/prometheus/alerts.yml does, on the
// metrics exported here.
//
// Time comes from an injected clockwork.Clock (the sampling interval and
// the age of the oldest request), so tests drive the Sampler with a fake
// clock.
package lag
