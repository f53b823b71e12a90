//go:build integration

package kafkaio_test

import (
	"os"
	"testing"
)

func TestEnsureTopicsApacheKafka(t *testing.T) {
	bootstrap := os.Getenv("KAFKA_BOOTSTRAP")
	if bootstrap == "" {
		t.Fatal("KAFKA_BOOTSTRAP is not set: run 'make test-integration'")
	}
	testEnsureTopics(t, bootstrap)
}

func TestFollowLiveOpenTransactionApacheKafka(t *testing.T) {
	bootstrap := os.Getenv("KAFKA_BOOTSTRAP")
	if bootstrap == "" {
		t.Fatal("KAFKA_BOOTSTRAP is not set: run 'make test-integration'")
	}
	testFollowLiveOpenTransaction(t, bootstrap)
}

func TestLagAdminApacheKafka(t *testing.T) {
	bootstrap := os.Getenv("KAFKA_BOOTSTRAP")
	if bootstrap == "" {
		t.Fatal("KAFKA_BOOTSTRAP is not set: run 'make test-integration'")
	}
	testLagAdmin(t, bootstrap)
}

func TestAPausedPartitionComesBackUnpausedApacheKafka(t *testing.T) {
	bootstrap := os.Getenv("KAFKA_BOOTSTRAP")
	if bootstrap == "" {
		t.Fatal("KAFKA_BOOTSTRAP is not set: run 'make test-integration'")
	}
	testPausedPartitionComesBackUnpaused(t, bootstrap)
}

func TestRestoreWaitsForOpenTransactionsApacheKafka(t *testing.T) {
	bootstrap := os.Getenv("KAFKA_BOOTSTRAP")
	if bootstrap == "" {
		t.Fatal("KAFKA_BOOTSTRAP is not set: run 'make test-integration'")
	}
	testRestoreWaitsForOpenTransactions(t, bootstrap)
}
