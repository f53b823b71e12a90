package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/lookup"
	"github.com/switchboard-mcp/switchboard/intents/payload"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// resultsFeed feeds the API from the results, timeouts and progress topics
// and the pending changelog: every partition, no consumer group, so every
// instance sees every result and can serve any client. One reader (the
// lookup store's Materializer) writes the store, which answers for any
// intent, and hands what comes after the topics' ends at start to an
// api.Feed, which puts each intent's progress before its result into
// api.Results, the live stream. It is also the API's History: a stream
// client that resumes, and an event stream's replay, read the same topics.
type resultsFeed struct {
	kafka     kafkaio.Settings
	codec     *schemas.Codec
	order     *api.Feed
	mat       *lookup.Materializer
	log       *slog.Logger
	topicRes  string
	topicTO   string
	topicProg string
}

var _ api.History = (*resultsFeed)(nil)

// feedTopics names the topics a resultsFeed reads (Pending may be empty:
// no pending states), and Prefetch bounds the bytes librdkafka prefetches
// from them (config.Memory's FeedPrefetch; 0: librdkafka's default).
type feedTopics struct {
	Results, Timeouts, Progress, Pending string
	Prefetch                             int64
}

// newResultsFeed returns the feed of order (the live stream) and store
// from the topics.
func newResultsFeed(kafka kafkaio.Settings, codec *schemas.Codec, log *slog.Logger, order *api.Feed, store *lookup.Store, t feedTopics) (*resultsFeed, error) {
	mat, err := lookup.NewMaterializer(lookup.Config{
		Results: t.Results, Timeouts: t.Timeouts, Pending: t.Pending, Progress: t.Progress,
		Store: store, Source: kafkaSource{kafka, t.Prefetch}, Codec: codec, Live: order, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	return &resultsFeed{
		kafka: kafka, codec: codec, order: order, mat: mat, log: log,
		topicRes: t.Results, topicTO: t.Timeouts, topicProg: t.Progress,
	}, nil
}

// run reads the topics until ctx ends (and releases the results the
// api.Feed holds for too long meanwhile).
func (f *resultsFeed) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	released := make(chan struct{})
	go func() {
		defer close(released)
		_ = f.order.Run(ctx) // returns nil when ctx ends
	}()
	defer func() { <-released }() // after cancel: Run returns at once
	return f.mat.Run(ctx)
}

// kafkaSource is the lookup store's lookup.Source on Kafka.
type kafkaSource struct {
	kafka    kafkaio.Settings
	prefetch int64 // kafkaio.Reading's PrefetchBytes
}

func (k kafkaSource) Describe(ctx context.Context, topic string) (lookup.TopicState, error) {
	st, err := kafkaio.DescribeTopic(ctx, k.kafka, topic)
	return lookup.TopicState(st), err
}

func (k kafkaSource) Read(ctx context.Context, from map[string][]int64, h lookup.Handler) error {
	reading := kafkaio.Reading{From: kafkaio.FromOffsetsOrEarliest(kafkaio.Offsets(from)), OnEOF: h.EOF, OnIdle: h.Idle, PrefetchBytes: k.prefetch}
	return kafkaio.Read(ctx, k.kafka, reading, func(r *port.Record) error {
		return h.Record(&lookup.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value})
	})
}

func (f *resultsFeed) topics() []string { return []string{f.topicRes, f.topicTO, f.topicProg} }

// decode turns a record of any of the topics into an api.Record; an
// undecodable one has no record (its position still counts).
func (f *resultsFeed) decode(rec *port.Record) api.Record {
	out := api.Record{Partition: rec.Partition, Offset: rec.Offset, Stream: api.StreamResults}
	var err error
	switch rec.Topic {
	case f.topicTO:
		out.Stream = api.StreamTimeouts
		var t schemas.IntentTimeout
		if err = f.codec.Decode(rec.Value, &t); err == nil {
			out.Timeout = &t
		}
	case f.topicProg:
		out.Stream = api.StreamProgress
		var p schemas.IntentProgress
		if err = f.codec.Decode(rec.Value, &p); err == nil {
			out.Progress = &p
		}
	default:
		var res schemas.IntentResult
		if err = f.codec.Decode(rec.Value, &res); err == nil {
			out.Result = &res
		}
	}
	if err != nil && rec.Value != nil {
		f.log.Warn("undecodable record skipped", "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "error", err)
	}
	return out
}

// Earliest implements api.History.
func (f *resultsFeed) Earliest(ctx context.Context) (api.Position, error) {
	lows, err := kafkaio.LowWatermarks(ctx, f.kafka, f.topics())
	if err != nil {
		return api.Position{}, err
	}
	return api.Position{Results: lows[f.topicRes], Timeouts: lows[f.topicTO], Progress: lows[f.topicProg]}, nil
}

// Replay implements api.History.
func (f *resultsFeed) Replay(ctx context.Context, from, to api.Position, fn func(api.Record) error) error {
	err := kafkaio.Read(ctx, f.kafka, kafkaio.Reading{
		From: kafkaio.FromOffsets(kafkaio.Offsets{f.topicRes: from.Results, f.topicTO: from.Timeouts, f.topicProg: from.Progress}),
		To:   kafkaio.ToOffsets(kafkaio.Offsets{f.topicRes: to.Results, f.topicTO: to.Timeouts, f.topicProg: to.Progress}),
	}, func(rec *port.Record) error { return fn(f.decode(rec)) })
	if errors.Is(err, kafkaio.ErrOffsetOutOfRange) {
		return fmt.Errorf("%w: %v", api.ErrCursorExpired, err)
	}
	return err
}

// catalogOf describes the configured agents and intent types for the API.
func catalogOf(cfg *config.Config) api.Catalog {
	var c api.Catalog
	for _, name := range slices.Sorted(maps.Keys(cfg.Agents)) {
		a := cfg.Agents[name]
		c.Agents = append(c.Agents, api.AgentInfo{Name: name, Topic: a.Topic, Encoding: a.Encoding})
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Intents)) {
		it := cfg.Intents[name]
		fb := "none"
		switch cache, static := it.Fallback.Cache != nil, it.Fallback.StaticJSON != ""; {
		case cache && static:
			fb = "cache+static"
		case cache:
			fb = "cache"
		case static:
			fb = "static"
		}
		c.IntentTypes = append(c.IntentTypes, api.IntentTypeInfo{
			Name: name, Agent: it.Agent,
			TimeoutMs: it.Timeout.D().Milliseconds(), MinTimeoutMs: it.MinTimeout.D().Milliseconds(),
			MaxTimeoutMs: it.MaxTimeout.D().Milliseconds(), Fallback: fb,
			Title: it.Title, Description: it.Description,
			InputSchema: compiled(it.InputSchema), OutputSchema: compiled(it.OutputSchema),
			Annotations: annotationsOf(it.Annotations),
		})
	}
	return c
}

func compiled(r *config.SchemaRef) *payload.Schema {
	if r == nil {
		return nil
	}
	return r.Schema
}

func annotationsOf(a *config.ToolAnnotations) *api.ToolAnnotations {
	if a == nil {
		return nil
	}
	return &api.ToolAnnotations{ReadOnly: a.ReadOnly, Destructive: a.Destructive, Idempotent: a.Idempotent, OpenWorld: a.OpenWorld}
}
