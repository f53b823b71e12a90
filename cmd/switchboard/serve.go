package main

import (
	"context"
	"io"

	"github.com/switchboard-mcp/switchboard/router/config"
)

func runServe(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := newFlags("serve", "--config FILE", `
Run the router and the HTTP/WebSocket API against a Kafka cluster, until
SIGINT or SIGTERM. The config file is YAML (see deploy/examples/switchboard.yaml
and the README's configuration reference). SWITCHBOARD_KAFKA_BOOTSTRAP_SERVERS,
SWITCHBOARD_SCHEMA_REGISTRY_URL and SWITCHBOARD_KAFKA_SASL_USERNAME/PASSWORD
override the file.`, `  switchboard serve --config deploy/examples/switchboard.yaml`, stderr)
	path := fs.String("config", "", "the YAML configuration `file` (required)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *path == "" {
		fs.Usage()
		return errUsage
	}
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	log := newLogger(stderr, cfg.Log.Level, cfg.Log.Format)
	if cfg.Topics.AutoCreate {
		if err := ensureTopics(ctx, cfg, true, stderr); err != nil {
			return err
		}
	}
	n, err := newNode(cfg, log)
	if err != nil {
		return err
	}
	log.Info("switchboard serving", "config", *path, "kafka", cfg.Kafka.BootstrapServers, "http", cfg.HTTP.Listen,
		"group", cfg.Kafka.GroupID, "intent_types", len(cfg.Intents), "encoding", n.codec.Encoding().String())
	return n.run(ctx)
}
