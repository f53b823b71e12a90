package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/contexts"
	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/schemas"
)

const contextUsage = `Usage: switchboard context <command> [flags]

Commands:
  publish    publish an entity's features through the delta publisher
  aggregate  compute windowed features from an events topic and publish them

Run 'switchboard context <command> --help' for a command's flags.
`

func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, contextUsage)
		return errUsage
	}
	switch args[0] {
	case "publish":
		return runContextPublish(ctx, args[1:], stdout, stderr)
	case "aggregate":
		return runContextAggregate(ctx, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, contextUsage)
		return nil
	}
	fmt.Fprintf(stderr, "unknown context command %q\n\n%s", args[0], contextUsage)
	return errUsage
}

func runContextPublish(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("context publish", "--entity ID --features JSON [flags]", `
Publish the features of one entity to the context-snapshot topic
(topics.context_snapshots), through the delta publisher: it first reads the
topic to find the entity's last snapshot, and produces a new one only if a
feature changed beyond its threshold (contexts.publish.thresholds in the
config; without one, any change counts), a feature was added or removed, or
the last snapshot is older than contexts.publish.heartbeat. It prints what it
decided as one JSON line. Routers attach the snapshot to the intents of types
with context: attach whose context_ref is the entity, and whose tenant is
--tenant (none: the intents without a tenant): entities are namespaced by
tenant like intents.`, `  switchboard context publish --entity user-1 --features '{"clicks_5m": 3, "spend_1h": 42.5}'
  switchboard context publish --tenant acme --entity user-1 --features '{"clicks_5m": 3}'
  switchboard context publish --config prod.yaml --entity card-9 --features '{"declines_1h": 1}'`, stderr)
	entity := fs.String("entity", "", "the entity `id` (required): the context_ref intents use")
	tenant := fs.String("tenant", "", "the `tenant` whose entity it is (none: the entity is seen by intents without a tenant)")
	features := fs.String("features", "", `the features, a JSON `+"`object`"+` of numbers, e.g. '{"clicks_5m": 3}' (required)`)
	wait := fs.Duration("timeout", 30*time.Second, "give up after this `duration`")
	c := connFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if *entity == "" || *features == "" {
		fmt.Fprintln(stderr, "--entity and --features are required")
		fs.Usage()
		return errUsage
	}
	fv, err := parseFeatures(*features)
	if err != nil {
		return fmt.Errorf("--features: %w", err)
	}
	if !intents.ValidLabel(*entity) {
		return fmt.Errorf("--entity: %q is not an entity id: 1 to %d bytes of printable UTF-8 without spaces", *entity, intents.MaxLabelLen)
	}
	if *tenant != "" && !intents.ValidLabel(*tenant) {
		return fmt.Errorf("--tenant: %q is not a valid tenant", *tenant)
	}
	cfg, err := c.load()
	if err != nil {
		return err
	}
	codec, err := c.codec(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *wait)
	defer cancel()
	s := c.settings(cfg, "switchboard-context")

	// The last snapshot of the entity, to compare with: read the topic.
	pub, closePub, err := seededPublisher(ctx, cfg, codec, s, publisherConfig(cfg), slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer closePub()
	d, err := pub.Publish(ctx, *tenant, *entity, fv)
	if err != nil {
		return fmt.Errorf("publishing to %s at %s: %w", cfg.Topics.ContextSnapshots, cfg.Kafka.BootstrapServers, err)
	}
	out := map[string]any{"entity_id": *entity, "published": d.Published, "reason": d.Reason}
	if *tenant != "" {
		out["tenant"] = *tenant
	}
	if len(d.Changed) > 0 {
		out["changed"] = d.Changed
	}
	if d.Snapshot != nil {
		out["version"], out["snapshot_ts"] = d.Snapshot.Version, d.Snapshot.SnapshotTs
	}
	return json.NewEncoder(stdout).Encode(out)
}

// seededPublisher reads the snapshot topic to its end into a store, then
// returns a delta publisher to that topic seeded from the store (so versions
// continue and what did not change is not published again), and what closes
// them. The store keeps following the topic until closed.
func seededPublisher(ctx context.Context, cfg *config.Config, codec *schemas.Codec, s kafkaio.Settings, pc contexts.PublisherConfig, log *slog.Logger, opts ...contexts.PublisherOption) (*contexts.Publisher, func(), error) {
	topic := cfg.Topics.ContextSnapshots
	store, err := contexts.NewStore(kafkaio.SnapshotReader{Settings: s, Topic: topic}, codec, contexts.WithLogger(log))
	if err != nil {
		return nil, nil, err
	}
	stopStore := background(ctx, store.Run)
	if err := caughtUp(ctx, store, stopStore); err != nil {
		return nil, nil, fmt.Errorf("reading %s at %s: %w", topic, cfg.Kafka.BootstrapServers, err)
	}
	sender, err := kafkaio.NewSnapshotSender(s, codec, topic)
	if err != nil {
		_ = stopStore()
		return nil, nil, err
	}
	pub, err := contexts.NewPublisher(pc, sender, append(opts, contexts.WithSeed(func(tenant, entity string) *schemas.ContextSnapshot {
		e, _ := store.Get(tenant, entity)
		return e.Snapshot
	}))...)
	closeAll := func() {
		sender.Close()
		if err := stopStore(); err != nil {
			log.Debug("the snapshot reader stopped", "error", err)
		}
	}
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return pub, closeAll, nil
}

// background runs f in a goroutine until the returned stop is called; stop
// waits for f and returns its error. It may be called more than once.
func background(ctx context.Context, f func(context.Context) error) (stop func() error) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
}

// caughtUp waits until store has read its topic, or ctx ends (then it stops
// the store and says why).
func caughtUp(ctx context.Context, store *contexts.Store, stop func() error) error {
	select {
	case <-store.CaughtUp():
		return nil
	case <-ctx.Done():
		return errors.Join(ctx.Err(), stop())
	}
}

// parseFeatures reads a JSON object of numbers.
func parseFeatures(text string) (map[string]float64, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return nil, fmt.Errorf("%q is not a JSON object such as '{\"clicks_5m\": 3}'", text)
	}
	if dec.More() {
		return nil, fmt.Errorf("%q has more than one JSON value", text)
	}
	out := make(map[string]float64, len(raw))
	for k, v := range raw {
		var f float64
		if err := json.Unmarshal(v, &f); err != nil {
			return nil, fmt.Errorf("feature %q is %s, not a number", k, v)
		}
		out[k] = f
	}
	return out, nil
}

// publisherConfig is the delta publisher's part of the configuration.
func publisherConfig(cfg *config.Config) contexts.PublisherConfig {
	pc := contexts.PublisherConfig{Heartbeat: cfg.Contexts.Publish.Heartbeat.D(), Thresholds: map[string]contexts.Threshold{}}
	for name, th := range cfg.Contexts.Publish.Thresholds {
		if th != nil {
			pc.Thresholds[name] = contexts.Threshold{Absolute: th.Absolute, Relative: th.Relative}
		}
	}
	return pc
}

func runContextAggregate(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := newFlags("context aggregate", "--config FILE [flags]", `
Compute windowed features from a topic of JSON events and publish them as
context snapshots through the delta publisher, until Ctrl-C. The config's
contexts.aggregate section names the events topic, the field that keys the
entity, the event-time field (or none: the record timestamp), the allowed
lateness, and the features: count, sum, avg, min, max or last over tumbling
or hopping windows. Example:

  contexts:
    aggregate:
      events_topic: events.clicks
      key_field: user_id
      tenant_field: tenant           # optional: the entity's tenant (or tenant: acme for all)
      time_field: ts                 # unix ms or RFC 3339; omit for the record time
      allowed_lateness: 30s
      features:
        clicks_5m: {op: count, window: 5m}
        paid_1h:   {op: sum, field: amount, window: 1h, hop: 5m}

It keeps no state: on start it re-reads the events topic from the start of
the oldest window still open (seeking by timestamp), then follows it.`, `  switchboard context aggregate --config switchboard.yaml`, stderr)
	c := connFlags(fs)
	metricsAddr := fs.String("metrics-listen", "", "serve this process's metrics (the aggregator's and its publisher's, Go's, the process's) at http://`host:port`/metrics, and /healthz; off when empty")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *c.config == "" {
		fmt.Fprintln(stderr, "--config is required: the aggregate section of a configuration file says what to compute")
		fs.Usage()
		return errUsage
	}
	cfg, err := c.load()
	if err != nil {
		return err
	}
	ac := cfg.Contexts.Aggregate
	if ac == nil {
		return fmt.Errorf("%s: contexts.aggregate: missing: it says what to compute (see 'switchboard context aggregate --help')", *c.config)
	}
	codec, err := c.codec(cfg)
	if err != nil {
		return err
	}
	log := newLogger(stderr, cfg.Log.Level, cfg.Log.Format)
	s := c.settings(cfg, "switchboard-aggregate")
	var (
		pubOpts []contexts.PublisherOption
		aggOpts = []contexts.AggregationOption{contexts.WithAggregationLogger(log), contexts.WithHeartbeat(max(cfg.Contexts.Publish.Heartbeat.D()/2, time.Second))}
	)
	if *metricsAddr != "" {
		m, err := listenMetrics(*metricsAddr, log)
		if err != nil {
			return err
		}
		defer m.close()
		pubOpts = append(pubOpts, contexts.WithPublisherRegisterer(m.reg))
		aggOpts = append(aggOpts, contexts.WithAggregationRegisterer(m.reg))
		m.serve()
	}

	// The snapshots already published seed the publisher, so that versions
	// continue and unchanged features are not published again.
	pc := publisherConfig(cfg)
	pc.SourceTopic = ac.EventsTopic
	pub, closePub, err := seededPublisher(ctx, cfg, codec, s, pc, log, pubOpts...)
	if err != nil {
		return err
	}
	defer closePub()
	aggCfg, format := aggregateConfig(ac)
	agg, err := contexts.NewAggregation(aggCfg, format, kafkaio.EventReader{Settings: s, Topic: ac.EventsTopic}, pub, aggOpts...)
	if err != nil {
		return err
	}
	log.Info("aggregating", "events", ac.EventsTopic, "snapshots", cfg.Topics.ContextSnapshots, "features", len(aggCfg.Features), "kafka", cfg.Kafka.BootstrapServers)
	return agg.Run(ctx)
}

// aggregateConfig turns the config's aggregate section into the window
// engine's configuration and the event format.
func aggregateConfig(ac *config.ContextAggregate) (contexts.AggregatorConfig, contexts.EventFormat) {
	out := contexts.AggregatorConfig{AllowedLateness: ac.AllowedLateness.D()}
	format := contexts.EventFormat{KeyField: ac.KeyField, TenantField: ac.TenantField, Tenant: ac.Tenant, TimeField: ac.TimeField}
	fields := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(ac.Features)) {
		f := ac.Features[name]
		out.Features = append(out.Features, contexts.WindowFeature{Name: name, Op: f.Op, Field: f.Field, Window: f.Window.D(), Hop: f.Hop.D()})
		if f.Field != "" && !fields[f.Field] {
			fields[f.Field] = true
			format.Fields = append(format.Fields, f.Field)
		}
	}
	return out, format
}
