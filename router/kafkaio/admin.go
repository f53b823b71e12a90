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
	a, err := newAdmin(s)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	ctx, stop := a.w.bound(ctx)
	defer stop()
	ts := make([]kafka.TopicSpecification, len(specs))
	for i, sp := range specs {
		ts[i] = kafka.TopicSpecification{Topic: sp.Name, NumPartitions: sp.Partitions, ReplicationFactor: sp.ReplicationFactor, Config: sp.Config}
	}
	res, err := a.CreateTopics(ctx, ts, kafka.SetAdminOperationTimeout(30*time.Second))
	if err != nil {
		if r := a.w.refusal(); r != nil {
			return nil, r
		}
		return nil, fmt.Errorf("kafkaio: creating topics: %w", err)
	}
	var created []string
	for _, r := range res {
		switch r.Error.Code() {
		case kafka.ErrNoError:
			created = append(created, r.Topic)
		case kafka.ErrTopicAlreadyExists:
		default:
			return created, refusedOr(s.refusal(r.Error, "Create", "topic "+r.Topic), "kafkaio: creating topic %s: %w", r.Topic)
		}
	}
	return created, nil
}
