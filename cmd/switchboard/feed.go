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
	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// resultsFeed feeds the API from the results and timeouts topics and the
// pending changelog: every partition, no consumer group, so every instance
// sees every result and can serve any client. One reader (the lookup
// store's Materializer) writes the store, which answers for any intent,
// and hands what comes after the topics' end at start to api.Results, the
// live stream. It is also the API's History: a stream client that resumes
// is replayed from the same topics.
type resultsFeed struct {
	kafka    kafkaio.Settings
	codec    *schemas.Codec
	log      *slog.Logger
	topicRes string
	topicTO  string
	mat      *lookup.Materializer
}

var _ api.History = (*resultsFeed)(nil)

// newResultsFeed returns the feed of results and store from the topics
// (pending may be empty: no pending states).
func newResultsFeed(kafka kafkaio.Settings, codec *schemas.Codec, log *slog.Logger, results *api.Results, store *lookup.Store,
	topicRes, topicTO, topicPending string,
) (*resultsFeed, error) {
	mat, err := lookup.NewMaterializer(lookup.Config{
		Results: topicRes, Timeouts: topicTO, Pending: topicPending,
		Store: store, Source: kafkaSource{kafka}, Codec: codec, Live: results, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	return &resultsFeed{kafka: kafka, codec: codec, log: log, topicRes: topicRes, topicTO: topicTO, mat: mat}, nil
}

// run reads the topics until ctx ends.
func (f *resultsFeed) run(ctx context.Context) error { return f.mat.Run(ctx) }

// kafkaSource is the lookup store's lookup.Source on Kafka.
type kafkaSource struct{ kafka kafkaio.Settings }

func (k kafkaSource) Describe(ctx context.Context, topic string) (lookup.TopicState, error) {
	st, err := kafkaio.DescribeTopic(ctx, k.kafka, topic)
	return lookup.TopicState(st), err
}

func (k kafkaSource) Read(ctx context.Context, from map[string][]int64, h lookup.Handler) error {
	return kafkaio.FollowFrom(ctx, k.kafka, kafkaio.Offsets(from), func(r *router.Record) error {
		return h.Record(&lookup.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value})
	}, h.EOF, h.Idle)
}

// decode turns a record of either topic into an api.Record; an
// undecodable one has neither Result nor Timeout (its position still
// counts).
func (f *resultsFeed) decode(rec *router.Record) api.Record {
	out := api.Record{Partition: rec.Partition, Offset: rec.Offset, Stream: api.StreamResults}
	var err error
	if rec.Topic == f.topicTO {
		out.Stream = api.StreamTimeouts
		var t schemas.IntentTimeout
		if err = f.codec.Decode(rec.Value, &t); err == nil {
			out.Timeout = &t
		}
	} else {
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
	lows, err := kafkaio.LowWatermarks(ctx, f.kafka, []string{f.topicRes, f.topicTO})
	if err != nil {
		return api.Position{}, err
	}
	return api.Position{Results: lows[f.topicRes], Timeouts: lows[f.topicTO]}, nil
}

// Replay implements api.History.
func (f *resultsFeed) Replay(ctx context.Context, from, to api.Position, fn func(api.Record) error) error {
	err := kafkaio.ReadRange(ctx, f.kafka,
		kafkaio.Offsets{f.topicRes: from.Results, f.topicTO: from.Timeouts},
		kafkaio.Offsets{f.topicRes: to.Results, f.topicTO: to.Timeouts},
		func(rec *router.Record) error { return fn(f.decode(rec)) })
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
		})
	}
	return c
}
