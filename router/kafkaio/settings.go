package kafkaio

import (
	"fmt"
	"log/slog"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Settings is how to reach the cluster: bootstrap servers plus librdkafka
// properties passed through as they are (security, SASL, TLS, tuning).
type Settings struct {
	Bootstrap  string
	Properties map[string]string
	ClientID   string
	// Stats, when set, receives librdkafka's statistics (JSON) of the
	// router's consumer and producers (Source, Sink, TxSink) built from
	// these settings, as often as statistics.interval.ms in Properties
	// says; it runs on their event goroutines and must not block. switchboard
	// bench counts the broker requests per intent with it.
	Stats func(json string)
	// Logger receives librdkafka's log lines of every client built from
	// these settings ("kafka client", with its tag and message), instead of
	// stderr; nil: slog.Default(). Lines that report the brokers refusing
	// the client (its credentials, an untrusted certificate) are not logged:
	// the operation that waited on the client returns them as a
	// *RefusedError.
	Logger *slog.Logger
}

// producerOnly and consumerOnly are librdkafka properties that one kind of
// client ignores with a warning; kafka.properties applies to every client, so
// each gets only what concerns it.
var (
	producerOnly = map[string]bool{
		"linger.ms": true, "queue.buffering.max.ms": true, "batch.num.messages": true, "batch.size": true,
		"compression.type": true, "compression.codec": true, "acks": true, "request.required.acks": true,
		"enable.idempotence": true, "message.timeout.ms": true, "delivery.timeout.ms": true, "retries": true,
		"message.send.max.retries": true, "queue.buffering.max.messages": true, "queue.buffering.max.kbytes": true,
		"transaction.timeout.ms": true, "sticky.partitioning.linger.ms": true,
	}
	consumerOnly = map[string]bool{
		"session.timeout.ms": true, "heartbeat.interval.ms": true, "max.poll.interval.ms": true,
		"fetch.wait.max.ms": true, "fetch.min.bytes": true, "fetch.max.bytes": true, "max.partition.fetch.bytes": true,
		"fetch.message.max.bytes": true, "queued.min.messages": true, "queued.max.messages.kbytes": true,
		"auto.offset.reset": true, "auto.commit.interval.ms": true, "check.crcs": true, "group.protocol": true,
		"group.remote.assignor": true, "coordinator.query.interval.ms": true,
	}
)

// adminConfigMap is the configuration of an admin client, which librdkafka
// runs as a producer: consumer properties would each log a CONFWARN line.
func (s Settings) adminConfigMap() (*kafka.ConfigMap, error) {
	return s.configMapFor("producer", nil)
}

// configMapFor builds a librdkafka configuration for a kind of client
// ("producer", "consumer" or "" for both): Switchboard's defaults, then the
// pass-through properties, leaving out those only the other kind reads,
// then what the caller insists on. Every librdkafka client kafkaio makes
// is built here, so a default set here reaches them all and kafka.properties
// overrides it.
func (s Settings) configMapFor(kind string, owned kafka.ConfigMap) (*kafka.ConfigMap, error) {
	cm := kafka.ConfigMap{
		"bootstrap.servers": s.Bootstrap,
		// Client telemetry (KIP-714) is off unless asked for: it logs a line
		// per client at startup and most clusters do not collect it.
		"enable.metrics.push": false,
		rebootstrapTrigger:    rebootstrapAfter,
	}
	if s.ClientID != "" {
		cm["client.id"] = s.ClientID
	}
	for k, v := range s.Properties {
		if (kind == "producer" && consumerOnly[k]) || (kind == "consumer" && producerOnly[k]) {
			continue
		}
		cm[k] = v
	}
	for k, v := range owned {
		cm[k] = v
	}
	if s.Bootstrap == "" {
		return nil, fmt.Errorf("kafkaio: no bootstrap servers")
	}
	return &cm, nil
}

// DefaultLingerMs is the linger.ms of every Switchboard producer unless
// kafka.properties sets linger.ms or its alias queue.buffering.max.ms
// (producerSettings); bench reports it.
const DefaultLingerMs = 0

// producerSettings are what every Switchboard producer uses, and a linger
// of DefaultLingerMs unless kafka.properties sets linger.ms (or its alias
// queue.buffering.max.ms).
//
// librdkafka's default linger is 5 ms, and an intent crosses four producers
// on its way (request, dispatch, response, result): at_least_once paid
// 20 ms of its ~26 ms p50 in lingers on an idle router. With linger 0 a
// record goes out at once, and batching under load still happens, because
// records queue up while a produce request to the same broker is in flight
// (BENCHMARKS.md "Issue 16: where the milliseconds go" counts the produce
// requests per intent with and without it). The transactional producers
// flush at each commit, which sends at once whatever the linger, so
// exactly_once's dispatch and result do not wait for it; its request and
// answer do.
func producerSettings(s Settings) kafka.ConfigMap {
	m := kafka.ConfigMap{
		"partitioner":               "murmur2_random",
		"enable.idempotence":        true,
		"acks":                      "all",
		"go.delivery.report.fields": "none",
	}
	_, linger := s.Properties["linger.ms"]
	_, alias := s.Properties["queue.buffering.max.ms"]
	if !linger && !alias {
		m["linger.ms"] = DefaultLingerMs
	}
	return m
}

// rebootstrapTrigger is how long librdkafka goes without a metadata answer
// before it connects to the bootstrap servers again (KIP-1102; librdkafka's
// default is 5 minutes). A broker in controlled shutdown answers a metadata
// request with its topics and no brokers (it is fenced), and librdkafka
// 2.10 and later then forgets every broker it knew (librdkafka#5301): the
// client has no broker left to ask, and only this timer, restarted by that
// very answer, brings it back. The agent runner's GroupReader met it and
// read nothing for the whole trigger after a broker restart, and so could
// any client: every client kafkaio makes (configMapFor) re-bootstraps after
// rebootstrapAfter unless kafka.properties sets its own trigger.
const (
	rebootstrapTrigger = "metadata.recovery.rebootstrap.trigger.ms"
	rebootstrapAfter   = 10000
)

// routerProducerSettings are the router's producers' (Sink, TxSink):
// producerSettings, and a bound on what librdkafka queues unacknowledged
// (queue.buffering.max.kbytes, 1 GiB by default) unless kafka.properties
// sets one: 128 MiB, some sixty intents of 1 MiB (a dispatch and a
// changelog record each) on their way to a slow broker. A full queue makes
// Produce wait up to a second for room, then fail (the router's delivery
// failure handling takes over).
func routerProducerSettings(s Settings) kafka.ConfigMap {
	m := producerSettings(s)
	if _, set := s.Properties["queue.buffering.max.kbytes"]; !set {
		m["queue.buffering.max.kbytes"] = 128 << 10
	}
	return m
}
