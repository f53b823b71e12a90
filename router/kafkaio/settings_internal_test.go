package kafkaio

import (
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

func TestPropertiesGoToTheClientsThatReadThem(t *testing.T) {
	s := Settings{Bootstrap: "b:1", Properties: map[string]string{"linger.ms": "0", "session.timeout.ms": "6000", "security.protocol": "SASL_SSL"}}
	c, err := s.configMapFor("consumer", nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.configMapFor("producer", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := (*c)["linger.ms"]; ok {
		t.Error("a consumer got linger.ms")
	}
	if _, ok := (*p)["session.timeout.ms"]; ok {
		t.Error("a producer got session.timeout.ms")
	}
	for _, m := range []kafka.ConfigMap{*c, *p} {
		if m["security.protocol"] != "SASL_SSL" {
			t.Errorf("a shared property was dropped: %v", m)
		}
	}
	if (*c)["session.timeout.ms"] != "6000" || (*p)["linger.ms"] != "0" {
		t.Error("a property was dropped from the client that reads it")
	}
}

// Admin clients are producers to librdkafka: consumer properties would log a
// CONFWARN line each ('topics create', 'serve' checking its topics).
func TestAdminClientsGetNoConsumerProperties(t *testing.T) {
	s := Settings{Bootstrap: "b:1", Properties: map[string]string{"heartbeat.interval.ms": "2000", "security.protocol": "SASL_SSL"}}
	a, err := s.adminConfigMap()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := (*a)["heartbeat.interval.ms"]; ok {
		t.Error("an admin client got heartbeat.interval.ms")
	}
	if (*a)["security.protocol"] != "SASL_SSL" {
		t.Errorf("an admin client lost a shared property: %v", *a)
	}
}
