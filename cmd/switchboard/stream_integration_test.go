//go:build integration

package main

import (
	"testing"
)

func kafkaBootstrap(t *testing.T) string {
	t.Helper()
	b := apacheKafka(t)
	return b
}

func TestStreamResumeAcrossInstancesApacheKafka(t *testing.T) {
	testStreamResumeAcrossInstances(t, kafkaBootstrap(t), 3000)
}

func TestStreamResumePastRetentionApacheKafka(t *testing.T) {
	testStreamResumePastRetention(t, kafkaBootstrap(t))
}
