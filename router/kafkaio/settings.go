package kafkaio

import (
	"fmt"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Settings is how to reach the cluster: bootstrap servers plus librdkafka
// properties passed through as they are (security, SASL, TLS, tuning).
type Settings struct {
	Bootstrap  string
	Properties map[string]string
	ClientID   string
}

// configMap builds a librdkafka configuration: the pass-through properties
// first, then what the caller insists on.
func (s Settings) configMap(owned kafka.ConfigMap) (*kafka.ConfigMap, error) {
	cm := kafka.ConfigMap{
		"bootstrap.servers": s.Bootstrap,
		// Client telemetry (KIP-714) is off unless asked for: it logs a line
		// per client at startup and most clusters do not collect it.
		"enable.metrics.push": false,
	}
	if s.ClientID != "" {
		cm["client.id"] = s.ClientID
	}
	for k, v := range s.Properties {
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

// producerSettings are what every Switchboard producer uses.
var producerSettings = kafka.ConfigMap{
	"partitioner":               "murmur2_random",
	"enable.idempotence":        true,
	"acks":                      "all",
	"go.delivery.report.fields": "none",
}
