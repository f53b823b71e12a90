package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
)

func runServe(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := newFlags("serve", "--config FILE", `
Run the router and the HTTP/WebSocket API against a Kafka cluster, until
SIGINT or SIGTERM (exit 0 once drained; 130 if the signal came before it
was serving, say while it waited for a broker). SIGHUP (or POST
/v1/admin/reload) rereads the file and applies what can change without a
restart (intent types, agents' admission and breakers: the README's
"Reloading the configuration"). The config file is YAML (see
deploy/examples/switchboard.yaml and the README's configuration reference).
SWITCHBOARD_KAFKA_BOOTSTRAP_SERVERS, SWITCHBOARD_SCHEMA_REGISTRY_URL and
SWITCHBOARD_KAFKA_SASL_USERNAME/PASSWORD override the file.

The API requires a credential on every request (http.auth: API keys and
JWTs, whose secrets come from the environment variables the file names).
Serving without authentication needs both http.auth.mode: off in the file
and --insecure-no-auth here; it is then logged loudly and shown by the
switchboard_auth_disabled metric.`, `  switchboard serve --config deploy/examples/switchboard.yaml`, stderr)
	path := fs.String("config", "", "the YAML configuration `file` (required)")
	instance := fs.String("instance-id", "", "this instance's stable `id` (overrides router.instance_id; one per instance)")
	insecure := fs.Bool("insecure-no-auth", false, "serve the API without authentication (needs http.auth.mode: off; anyone who can reach it can submit intents and read every tenant's results)")
	pprofAddr := fs.String("pprof", "", "serve Go's profiles (/debug/pprof/) on this `address`, a listener of their own (off by default; bind it to loopback: profiles show what the process holds)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *path == "" {
		fmt.Fprintln(stderr, "--config is required: the YAML file naming the Kafka cluster, topics, agents and intent types (deploy/examples/switchboard.yaml is one)")
		fs.Usage()
		return errUsage
	}
	cfg, hash, err := loadConfig(*path, *instance)
	if err != nil {
		return err
	}
	if err := checkServeAuth(cfg, *insecure); err != nil {
		return err
	}
	apiCfg, err := apiConfig(cfg, true)
	if err != nil {
		return err
	}
	log := newLogger(stderr, cfg.Log.Level, cfg.Log.Format)
	process := applyMemoryLimit(deriveMemoryLimit(cfg, apiCfg), log)
	if *pprofAddr != "" {
		if err := startProfiling(ctx, *pprofAddr, log); err != nil {
			return err
		}
	}
	if err := checkTopicsAtStart(ctx, cfg, log); err != nil {
		return err
	}
	n, err := newNode(cfg, apiCfg, log, &configFile{path: *path, instance: *instance, hash: hash}, process)
	if err != nil {
		return err
	}
	if cfg.Router.InstanceID == "" {
		log.Warn("router.instance_id is not set: using " + n.instanceID + " for this run; give each instance a stable id so that after a restart it gets its partitions back at once and aborts what it left open")
	}
	log.Info("switchboard serving", "config", *path, "kafka", cfg.Kafka.BootstrapServers, "http", cfg.HTTP.Listen,
		"group", cfg.Kafka.GroupID, "instance", n.instanceID, "delivery", cfg.Router.Delivery,
		"intent_types", len(cfg.Intents), "config_hash", hash, "encoding", n.codec.Encoding().String(), "auth", cfg.HTTP.Auth.Mode)
	return n.run(ctx)
}

// brokerHint adds to an error meaning that no broker answered where to look
// and how to start one.
func brokerHint(err error, cfg *config.Config) error {
	var kerr kafka.Error
	if !errors.As(err, &kerr) {
		return err
	}
	switch kerr.Code() {
	case kafka.ErrTransport, kafka.ErrAllBrokersDown, kafka.ErrTimedOut, kafka.ErrResolve:
		return fmt.Errorf("%w (no Kafka broker answered at %s, named by kafka.bootstrap_servers of %s or %s: is Kafka running there? 'make kafka-up' starts one on 127.0.0.1:9092; 'switchboard dev' needs none)",
			err, cfg.Kafka.BootstrapServers, cfg.File(), config.EnvBootstrap)
	}
	return err
}

// checkTopicsAtStart refuses to start without the topics the config uses
// (creating them first with topics.auto_create), or when the requests and
// responses topics do not have the configured partition count (the router
// could not pair across instances). Other differences are logged.
func checkTopicsAtStart(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	reports, err := kafkaio.EnsureTopics(ctx, settingsOf(cfg, "switchboard-topics"), cfg.TopicPlans(), cfg.Topics.AutoCreate)
	if err != nil {
		return brokerHint(err, cfg)
	}
	var missing []string
	for _, r := range reports {
		switch r.Status {
		case kafkaio.TopicCreated:
			log.Info("topic created", "topic", r.Plan.Name, "partitions", r.Plan.Partitions)
		case kafkaio.TopicMissing:
			missing = append(missing, r.Plan.Name)
		case kafkaio.TopicConflict:
			if r.Plan.Name == cfg.Topics.Requests || r.Plan.Name == cfg.Topics.Responses {
				for _, c := range r.Conflicts {
					if strings.HasPrefix(c, "partitions ") {
						return fmt.Errorf("topic %s: %s: requests and responses must have topics.partitions partitions", r.Plan.Name, c)
					}
				}
			}
			log.Warn("topic differs from the configuration", "topic", r.Plan.Name, "differences", strings.Join(r.Conflicts, "; "))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("topics missing: %s (create them with 'switchboard topics create --config FILE', or set topics.auto_create: true)", strings.Join(missing, ", "))
	}
	return nil
}
