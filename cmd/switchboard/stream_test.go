package main

import (
	"testing"

	"github.com/switchboard-mcp/switchboard/router/embedded"
)

// The stream's Kafka path on the embedded broker: fast, and the same
// scenarios as the integration tests on Apache Kafka.

func embeddedBootstrap(t *testing.T) string {
	t.Helper()
	c, err := embedded.Start(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.Bootstrap()
}

func TestStreamResumeAcrossInstancesEmbedded(t *testing.T) {
	testStreamResumeAcrossInstances(t, embeddedBootstrap(t), 1500)
}

func TestStreamResumePastRetentionEmbedded(t *testing.T) {
	testStreamResumePastRetention(t, embeddedBootstrap(t))
}
