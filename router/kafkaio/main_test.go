package kafkaio_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// librdkafka's Go wrapper keeps no goroutines after Close; kfake's
	// listener goroutines end with Cluster.Close.
	goleak.VerifyTestMain(m)
}
