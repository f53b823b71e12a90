//go:build integration

package conformance

import (
	"os"
	"testing"
)

// TestApacheKafka runs the suite against the broker at KAFKA_BOOTSTRAP
// (make test-integration starts one). It fails, never skips, without one.
func TestApacheKafka(t *testing.T) {
	bootstrap := os.Getenv("KAFKA_BOOTSTRAP")
	if bootstrap == "" {
		t.Fatal("KAFKA_BOOTSTRAP is not set: run 'make test-integration', which starts Apache Kafka, or point it at a broker")
	}
	run(t, bootstrap)
}
