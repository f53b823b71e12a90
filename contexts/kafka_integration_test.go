//go:build integration

package contexts_test

import (
	"os"
	"testing"
)

// TestStoreOverApacheKafka: compaction semantics on a real broker.
func TestStoreOverApacheKafka(t *testing.T) {
	bootstrap := os.Getenv("KAFKA_BOOTSTRAP")
	if bootstrap == "" {
		t.Fatal("KAFKA_BOOTSTRAP is not set: run 'make test-integration'")
	}
	testStoreOverKafka(t, bootstrap, true)
}

// TestAggregationRestartOverApacheKafka: the aggregator stopped mid-window
// and started again (re-reading the events topic by timestamp) publishes
// what an uninterrupted run does.
func TestAggregationRestartOverApacheKafka(t *testing.T) {
	bootstrap := os.Getenv("KAFKA_BOOTSTRAP")
	if bootstrap == "" {
		t.Fatal("KAFKA_BOOTSTRAP is not set: run 'make test-integration'")
	}
	testAggregationRestartOverKafka(t, bootstrap)
}
