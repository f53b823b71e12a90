//go:build integration

package kafkaio_test

import (
	"os"
	"testing"
)

func TestHangWatchApacheKafka(t *testing.T) {
	bootstrap := os.Getenv("KAFKA_BOOTSTRAP")
	if bootstrap == "" {
		t.Fatal("KAFKA_BOOTSTRAP is not set: run 'make test-integration'")
	}
	testHangWatch(t, bootstrap)
}
