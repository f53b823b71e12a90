//go:build integration

package main

import (
	"os"
	"testing"
)

func kafkaBootstrap(t *testing.T) string {
	t.Helper()
	b := os.Getenv("KAFKA_BOOTSTRAP")
	if b == "" {
		t.Fatal("KAFKA_BOOTSTRAP is not set: run 'make test-integration'")
	}
	return b
}

func TestStreamResumeAcrossInstancesApacheKafka(t *testing.T) {
	testStreamResumeAcrossInstances(t, kafkaBootstrap(t), 3000)
}

func TestStreamResumePastRetentionApacheKafka(t *testing.T) {
	testStreamResumePastRetention(t, kafkaBootstrap(t))
}
