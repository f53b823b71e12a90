package kafkaio

import (
	"context"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// TopicSpec is a topic Switchboard needs.
type TopicSpec struct {
	Name              string
	Partitions        int
	ReplicationFactor int
	Config            map[string]string // e.g. cleanup.policy=compact
}

// CreateTopics creates the topics that do not exist yet and returns the names
// it created. A topic that already exists is not an error.
func CreateTopics(ctx context.Context, s Settings, specs []TopicSpec) ([]string, error) {
	cm, err := s.adminConfigMap()
	if err != nil {
		return nil, err
	}
	a, err := kafka.NewAdminClient(cm)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: creating the admin client: %w", err)
	}
	defer a.Close()
	ts := make([]kafka.TopicSpecification, len(specs))
	for i, sp := range specs {
		ts[i] = kafka.TopicSpecification{Topic: sp.Name, NumPartitions: sp.Partitions, ReplicationFactor: sp.ReplicationFactor, Config: sp.Config}
	}
	res, err := a.CreateTopics(ctx, ts, kafka.SetAdminOperationTimeout(30*time.Second))
	if err != nil {
		return nil, fmt.Errorf("kafkaio: creating topics: %w", err)
	}
	var created []string
	for _, r := range res {
		switch r.Error.Code() {
		case kafka.ErrNoError:
			created = append(created, r.Topic)
		case kafka.ErrTopicAlreadyExists:
		default:
			return created, fmt.Errorf("kafkaio: creating topic %s: %w", r.Topic, r.Error)
		}
	}
	return created, nil
}
