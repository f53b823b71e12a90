package kafkaio_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// newTopic creates a topic of the given partitions on bootstrap, named
// prefix + "." + a random tag so that runs against one broker never meet,
// and returns its name.
func newTopic(ctx context.Context, t *testing.T, bootstrap, prefix string, partitions int) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	topic := prefix + "." + hex.EncodeToString(b)
	admin, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "enable.metrics.push": false})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	res, err := admin.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}})
	if err != nil || res[0].Error.Code() != kafka.ErrNoError {
		t.Fatalf("creating %s: %v %v", topic, err, res)
	}
	return topic
}
