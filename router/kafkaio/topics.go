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
	a, err := newAdmin(s)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	ctx, stop := a.w.bound(ctx)
	defer stop()

	md, err := a.metadata(ctx, nil)
	if err != nil {
		return nil, refusedOr(err, "kafkaio: reading cluster metadata from %s: %w", s.Bootstrap)
	}
	// The metadata of every topic leaves out those the principal may not
	// describe: ask for the others by name, to tell a missing ACL from a
	// missing topic.
	var unseen []string
	for _, p := range plans {
		if _, ok := md.Topics[p.Name]; !ok {
			unseen = append(unseen, p.Name)
		}
	}
	if len(unseen) > 0 {
		res, err := a.DescribeTopics(ctx, kafka.NewTopicCollectionOfTopicNames(unseen))
		if err != nil {
			return nil, refusedOr(a.refusalOr(err), "kafkaio: describing topics: %w")
		}
		for _, d := range res.TopicDescriptions {
			if d.Error.Code() == kafka.ErrTopicAuthorizationFailed {
				return nil, s.refusal(d.Error, "Describe", "topic "+d.Name)
			}
		}
	}
	found := map[string]*existing{}
	var resources []kafka.ConfigResource
	for _, p := range plans {
		t, ok := md.Topics[p.Name]
		if ok && t.Error.Code() == kafka.ErrTopicAuthorizationFailed {
			return nil, s.refusal(t.Error, "Describe", "topic "+p.Name)
		}
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
			return nil, refusedOr(a.refusalOr(err), "kafkaio: describing topic configs: %w")
		}
		for _, r := range res {
			e := found[r.Name]
			if r.Error.Code() == kafka.ErrTopicAuthorizationFailed {
				return nil, s.refusal(r.Error, "DescribeConfigs", "topic "+r.Name)
			}
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
			return reports, refusedOr(a.refusalOr(err), "kafkaio: creating topics: %w")
		}
		for _, r := range res {
			if r.Error.Code() != kafka.ErrNoError && r.Error.Code() != kafka.ErrTopicAlreadyExists {
				return reports, refusedOr(s.refusal(r.Error, "Create", "topic "+r.Topic), "kafkaio: creating topic %s: %w", r.Topic)
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
