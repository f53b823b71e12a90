package kafkaio

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/config"
)

// TopicStatus is what EnsureTopics found or did for one topic.
type TopicStatus string

// TopicStatus values.
const (
	TopicCreated  TopicStatus = "created"
	TopicMatched  TopicStatus = "matched"
	TopicMissing  TopicStatus = "missing" // when asked not to create
	TopicConflict TopicStatus = "conflict"
)

// TopicReport is one line of EnsureTopics' report.
type TopicReport struct {
	Plan      config.TopicPlan
	Status    TopicStatus
	Conflicts []string // what differs, when Status is conflict
}

// existing is what the cluster says of a topic.
type existing struct {
	partitions int
	rf         int
	configs    map[string]string
}

// EnsureTopics compares every planned topic with the cluster. With create
// set, it creates those missing; it never changes an existing topic. A topic
// that exists with another partition count, replication factor, cleanup
// policy, retention or max.message.bytes is a conflict.
func EnsureTopics(ctx context.Context, s Settings, plans []config.TopicPlan, create bool) ([]TopicReport, error) {
	cm, err := s.adminConfigMap()
	if err != nil {
		return nil, err
	}
	a, err := kafka.NewAdminClient(cm)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: creating the admin client: %w", err)
	}
	defer a.Close()

	md, err := a.GetMetadata(nil, true, 15000)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: reading cluster metadata from %s: %w", s.Bootstrap, err)
	}
	found := map[string]*existing{}
	var resources []kafka.ConfigResource
	for _, p := range plans {
		t, ok := md.Topics[p.Name]
		if !ok || t.Error.Code() == kafka.ErrUnknownTopicOrPart || len(t.Partitions) == 0 {
			continue
		}
		e := &existing{partitions: len(t.Partitions)}
		if len(t.Partitions[0].Replicas) > 0 {
			e.rf = len(t.Partitions[0].Replicas)
		}
		found[p.Name] = e
		resources = append(resources, kafka.ConfigResource{Type: kafka.ResourceTopic, Name: p.Name})
	}
	if len(resources) > 0 {
		res, err := a.DescribeConfigs(ctx, resources)
		if err != nil {
			return nil, fmt.Errorf("kafkaio: describing topic configs: %w", err)
		}
		for _, r := range res {
			e := found[r.Name]
			if e == nil || r.Error.Code() != kafka.ErrNoError {
				continue
			}
			e.configs = map[string]string{}
			for k, v := range r.Config {
				e.configs[k] = v.Value
			}
		}
	}

	reports := make([]TopicReport, 0, len(plans))
	var toCreate []kafka.TopicSpecification
	for _, p := range plans {
		e := found[p.Name]
		if e == nil {
			st := TopicMissing
			if create {
				st = TopicCreated
				toCreate = append(toCreate, kafka.TopicSpecification{Topic: p.Name, NumPartitions: p.Partitions, ReplicationFactor: p.ReplicationFactor, Config: p.Configs()})
			}
			reports = append(reports, TopicReport{Plan: p, Status: st})
			continue
		}
		if c := compareTopic(p, e); len(c) > 0 {
			reports = append(reports, TopicReport{Plan: p, Status: TopicConflict, Conflicts: c})
		} else {
			reports = append(reports, TopicReport{Plan: p, Status: TopicMatched})
		}
	}
	if len(toCreate) > 0 {
		res, err := a.CreateTopics(ctx, toCreate, kafka.SetAdminOperationTimeout(30*time.Second))
		if err != nil {
			return reports, fmt.Errorf("kafkaio: creating topics: %w", err)
		}
		for _, r := range res {
			if r.Error.Code() != kafka.ErrNoError && r.Error.Code() != kafka.ErrTopicAlreadyExists {
				return reports, fmt.Errorf("kafkaio: creating topic %s: %w", r.Topic, r.Error)
			}
		}
	}
	return reports, nil
}

// compareTopic lists how an existing topic differs from its plan.
func compareTopic(p config.TopicPlan, e *existing) []string {
	var out []string
	if e.partitions != p.Partitions {
		why := ""
		if p.IntentKeyed {
			why = " (intent-keyed topics must share one partition count)"
		}
		out = append(out, fmt.Sprintf("partitions %d, want %d%s", e.partitions, p.Partitions, why))
	}
	if e.rf != 0 && e.rf != p.ReplicationFactor {
		out = append(out, fmt.Sprintf("replication factor %d, want %d", e.rf, p.ReplicationFactor))
	}
	if e.configs != nil {
		want := p.Configs()
		keys := make([]string, 0, len(want))
		for k := range want {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if have, ok := e.configs[k]; ok && !sameConfig(k, have, want[k]) {
				out = append(out, fmt.Sprintf("%s=%s, want %s", k, have, want[k]))
			}
		}
	}
	return out
}

// sameConfig compares topic settings; cleanup.policy may list several.
func sameConfig(key, have, want string) bool {
	if key == "cleanup.policy" {
		return strings.ReplaceAll(have, " ", "") == want
	}
	return have == want
}
