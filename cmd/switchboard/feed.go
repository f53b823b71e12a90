package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/intents/payload"
	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// resultsFeed feeds the API's view from the results, timeouts and progress
// topics: every partition of each, no consumer group, so every instance sees
// every result and can serve any client. Records go through an api.Feed,
// which puts each intent's progress before its result. It is also the API's
// History: a stream client that resumes, and an event stream's replay, read
// the same topics.
type resultsFeed struct {
	kafka     kafkaio.Settings
	codec     *schemas.Codec
	results   *api.Results
	order     *api.Feed
	log       *slog.Logger
	topicRes  string
	topicTO   string
	topicProg string
}

var _ api.History = (*resultsFeed)(nil)

// run reads the topics from their ends until ctx ends (and releases the
// results the api.Feed holds for too long meanwhile).
func (f *resultsFeed) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	released := make(chan struct{})
	go func() {
		defer close(released)
		_ = f.order.Run(ctx) // returns nil when ctx ends
	}()
	defer func() { <-released }() // after cancel: Run returns at once
	ready := func(start kafkaio.Offsets) {
		f.order.Begin(api.Position{Results: start[f.topicRes], Timeouts: start[f.topicTO], Progress: start[f.topicProg]})
	}
	return kafkaio.FollowLive(ctx, f.kafka, f.topics(), ready, func(rec *router.Record) error {
		r := f.decode(rec)
		switch r.Stream {
		case api.StreamResults:
			f.order.Result(r.Partition, r.Offset, r.Result)
		case api.StreamTimeouts:
			f.order.Timeout(r.Partition, r.Offset, r.Timeout)
		default:
			f.order.Progress(r.Partition, r.Offset, r.Progress)
		}
		return nil
	})
}

func (f *resultsFeed) topics() []string { return []string{f.topicRes, f.topicTO, f.topicProg} }

// decode turns a record of any of the topics into an api.Record; an
// undecodable one has no record (its position still counts).
func (f *resultsFeed) decode(rec *router.Record) api.Record {
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
	err := kafkaio.ReadRange(ctx, f.kafka,
		kafkaio.Offsets{f.topicRes: from.Results, f.topicTO: from.Timeouts, f.topicProg: from.Progress},
		kafkaio.Offsets{f.topicRes: to.Results, f.topicTO: to.Timeouts, f.topicProg: to.Progress},
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
