package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/intents/client"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/embedded"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"go.yaml.in/yaml/v3"
)

// devConfig is deploy/examples/switchboard.yaml (a test keeps them equal).
//
//go:embed dev.yaml
var devConfig []byte

// slowDelay is how long the demo agent named "slow" takes: longer than
// fraud_check's 300ms timeout, so it times out, falls back, and its late
// answer fills the fallback cache.
const slowDelay = time.Second

func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dev", "[--config FILE] [flags]", `
Run all of Switchboard on this machine with no Kafka installed: an embedded
Kafka-protocol broker, a Schema Registry, the router (writing Avro), the HTTP
and WebSocket API, and a demo agent for each configured agent ("slow" answers
after one second, "failing" fails every intent, "writer" writes its answer
word by word as progress, the others answer at once). Any Kafka client (kcat, Python, Java)
can reach the broker and the registry. Everything lives in memory and is gone
when you stop it (Ctrl-C).

Without --config it uses the built-in example configuration, the same as
deploy/examples/switchboard.yaml. To try your own agent, give it no demo
agent: demo: false on it in the config, or name the demo agents to run with
--agents (--agents=false runs none). The banner names the agents that wait
for yours. dev always uses its own registry: a schema_registry.url in the
config is ignored (and said to be), and agents may ask for encoding: avro.

The API runs without authentication (any caller, every tenant's results),
and says so; --auth enforces the config's http.auth instead, to try API keys
and JWTs locally.`, `  switchboard dev
  switchboard dev --kafka-port 19092 --registry 127.0.0.1:18081 --http 127.0.0.1:18080`, stderr)
	path := fs.String("config", "", "a YAML configuration `file` (default: the built-in example)")
	kafkaPort := fs.Int("kafka-port", 9092, "the embedded broker's `port` on 127.0.0.1 (0 picks a free one)")
	registry := fs.String("registry", "127.0.0.1:8081", "the schema registry's listen `address`; empty for none (then records are JSON)")
	httpAddr := fs.String("http", "", "the API's listen `address` (default: http.listen of the config)")
	agents := fs.String("agents", "all", "the demo agents to run: all (those without demo: false), none (or false), or a comma-separated `list` of agent names")
	withAuth := fs.Bool("auth", false, "enforce http.auth of the config (default: no authentication)")
	if err := parse(fs, args); err != nil {
		return err
	}
	var (
		cfg *config.Config
		err error
	)
	name, data := "built-in dev config", devConfig
	if *path != "" {
		if data, err = os.ReadFile(*path); err != nil {
			return fmt.Errorf("config: %w", err)
		}
		name = *path
	}
	ignored := registryInConfig(data)
	if ignored == "" {
		ignored, _ = os.LookupEnv(config.EnvRegistryURL)
	}
	// dev's own registry stands for any the file or the environment names
	// (its address is known once it listens), so encoding: avro is valid.
	cfg, err = config.Parse(name, data, devLookupEnv(*registry != ""))
	if err != nil {
		return err
	}
	if *registry == "" {
		for _, name := range agentNames(cfg) {
			if cfg.Agents[name].Encoding == config.EncodingAvro {
				return fmt.Errorf("%s: agents.%s.encoding: avro needs a schema registry, and --registry is empty", cfg.File(), name)
			}
		}
	}
	demos, err := demoAgents(cfg, *agents)
	if err != nil {
		return err
	}
	if *httpAddr != "" {
		cfg.HTTP.Listen = *httpAddr
	}
	apiCfg, err := apiConfig(cfg, *withAuth)
	if err != nil {
		return err
	}
	log := newLogger(stderr, cfg.Log.Level, cfg.Log.Format)

	cluster, err := embedded.Start(embedded.Options{KafkaPort: *kafkaPort, Registry: *registry != "", RegistryAddr: *registry})
	switch {
	case errors.Is(err, embedded.ErrRegistryListen):
		return fmt.Errorf("%w (is another 'switchboard dev' or a schema registry running? move it with --registry 127.0.0.1:0, or --registry '' for none)", err)
	case err != nil:
		return fmt.Errorf("%w (is another 'switchboard dev' or a Kafka broker running? move it with --kafka-port 0)", err)
	}
	defer cluster.Close()
	cfg.Kafka.BootstrapServers = cluster.Bootstrap()
	cfg.SchemaRegistry.URL = cluster.RegistryURL()
	cfg.SchemaRegistry.Username, cfg.SchemaRegistry.Password = "", ""

	if _, err := kafkaio.EnsureTopics(ctx, settingsOf(cfg, "switchboard-dev"), cfg.TopicPlans(), true); err != nil {
		return err
	}
	n, err := newNode(cfg, apiCfg, log, nil, 0)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var nodeErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		nodeErr = n.run(ctx)
		cancel()
	}()
	for _, name := range demos {
		a, err := client.NewAgent(client.AgentConfig{
			Name: name, Topic: cfg.Agents[name].Topic, GroupID: cfg.Agents[name].GroupID, ResponsesTopic: cfg.Topics.Responses,
			Kafka: settingsOf(cfg, "switchboard-agent-"+name), Codec: n.codec, Logger: log,
			TracerProvider: n.tracerProvider(),
		}, devHandler(name))
		if err != nil {
			cancel()
			wg.Wait()
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				log.Error("demo agent stopped", "agent", name, "error", err)
			}
		}()
	}
	select {
	case <-n.api.Ready():
		printDevBanner(stdout, cfg, n.api.Addr(), cluster, *kafkaPort, apiCfg.Auth.Required, demos, ignored)
	case <-ctx.Done():
	}
	wg.Wait()
	return nodeErr
}

// devRegistryPlaceholder stands for dev's registry while the config is
// validated: its real URL replaces it once the registry listens.
const devRegistryPlaceholder = "http://switchboard-dev-registry"

// devLookupEnv is os.LookupEnv, except that with a registry the registry URL
// is dev's own.
func devLookupEnv(registry bool) func(string) (string, bool) {
	return func(k string) (string, bool) {
		if k == config.EnvRegistryURL {
			if registry {
				return devRegistryPlaceholder, true
			}
			return "", false
		}
		return os.LookupEnv(k)
	}
}

// registryInConfig is schema_registry.url of a config file, "" when it has
// none or cannot be read (config.Parse reports that).
func registryInConfig(data []byte) string {
	var c struct {
		SchemaRegistry struct {
			URL string `yaml:"url"`
		} `yaml:"schema_registry"`
	}
	if yaml.Unmarshal(data, &c) != nil {
		return ""
	}
	return c.SchemaRegistry.URL
}

// demoAgents are the agents dev runs a demo agent for, sorted: --agents all
// (every agent without demo: false), none (or false), or a list of names,
// each a configured agent.
func demoAgents(cfg *config.Config, flag string) ([]string, error) {
	var out []string
	switch strings.TrimSpace(flag) {
	case "all", "true":
		for name, a := range cfg.Agents {
			if a.RunsDemo() {
				out = append(out, name)
			}
		}
	case "none", "false", "":
	default:
		for _, name := range strings.Split(flag, ",") {
			name = strings.TrimSpace(name)
			if _, ok := cfg.Agents[name]; !ok {
				return nil, fmt.Errorf("--agents: %q is not an agent of %s (agents are: %s)", name, cfg.File(), strings.Join(agentNames(cfg), ", "))
			}
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

func agentNames(cfg *config.Config) []string {
	names := make([]string, 0, len(cfg.Agents))
	for name := range cfg.Agents {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// devHandler is the demo agent of each agent name: "writer" streams its
// answer word by word, "slow" answers after slowDelay, the others at once.
func devHandler(name string) client.Handler {
	switch name {
	case "writer":
		return client.WriterHandler(name, nil)
	case "slow":
		return client.DemoHandler(name, slowDelay, 0, nil)
	case "failing":
		return client.DemoHandler(name, 0, 1, nil) // every intent fails: agent_error
	}
	return client.DemoHandler(name, 0, 0, nil)
}

// demoLines are the banner's lines on agents: the demo agents running, and
// the configured agents that have none (they wait for the user's agent).
func demoLines(cfg *config.Config, demos []string) string {
	var b strings.Builder
	switch {
	case len(demos) == 0:
		fmt.Fprintf(&b, "  demo agents        none (of %d configured)\n", len(cfg.Agents))
	default:
		var notes []string
		if slices.Contains(demos, "slow") {
			notes = append(notes, fmt.Sprintf("slow answers after %s", slowDelay))
		}
		if slices.Contains(demos, "failing") {
			notes = append(notes, "failing fails every intent")
		}
		if slices.Contains(demos, "writer") {
			notes = append(notes, "writer streams")
		}
		note := ""
		if len(notes) > 0 {
			note = " (" + strings.Join(notes, "; ") + ")"
		}
		fmt.Fprintf(&b, "  demo agents        %d of %d: %s%s\n", len(demos), len(cfg.Agents), strings.Join(demos, ", "), note)
	}
	var waiting []string
	for _, name := range agentNames(cfg) {
		if !slices.Contains(demos, name) {
			waiting = append(waiting, fmt.Sprintf("%s (reads %s)", name, cfg.Agents[name].Topic))
		}
	}
	if len(waiting) > 0 {
		fmt.Fprintf(&b, "  waiting for yours  %s: no demo agent answers them; start your agent\n", strings.Join(waiting, ", "))
	}
	return b.String()
}

func printDevBanner(w io.Writer, cfg *config.Config, httpAddr string, cluster *embedded.Cluster, askedPort int, authOn bool, demos []string, ignoredRegistry string) {
	auth, header := "OFF (dev): no credential needed, every tenant's results visible", ""
	if authOn {
		auth = "required (http.auth of the config): send Authorization: Bearer <API key or JWT>"
		header = ` -H "Authorization: Bearer $SWITCHBOARD_API_KEY"`
	}
	brokers := ""
	if askedPort != 9092 {
		brokers = " --brokers " + cluster.Bootstrap()
	}
	if u := cluster.RegistryURL(); u != "" && u != "http://"+defaultRegistry {
		brokers += " --registry " + u
	}
	reg := cluster.RegistryURL()
	if reg == "" {
		reg = "(none: records are JSON)"
	}
	if ignoredRegistry != "" && cluster.RegistryURL() != "" {
		reg += fmt.Sprintf("   (dev's own; %s, named by the config or %s, is ignored)", ignoredRegistry, config.EnvRegistryURL)
	}
	fmt.Fprintf(w, `
Switchboard dev is running.
  Kafka (embedded)   %s
  Schema Registry    %s
  HTTP API           http://%s   (metrics at /metrics)
  WebSocket          ws://%s/v1/stream
  MCP                http://%s/mcp   (every intent type is a tool; stdio: switchboard mcp --url http://%s/mcp)
  Authentication     %s
%s
Try, in another terminal:
  switchboard send --type echo --payload '{"q":1}' --wait 5s%s
  switchboard send --type fraud_check --payload '{"amount":1}' --context-ref user-1 --wait 5s%s
    (times out after 300ms and falls back to the static answer; run it again
     two seconds later and it falls back to the slow agent's cached answer)
  curl -s -XPOST 'http://%s/v1/intents?wait=5s'%s -d '{"intent_type":"echo","payload":{"hello":"world"}}'
  switchboard tail --topic results%s

Streaming (the writer agent writes its answer word by word, as progress):
  switchboard send --type write --payload '{"words":20}' --follow%s
  curl -N -XPOST 'http://%s/v1/intents?stream=sse'%s -d '{"intent_type":"write","payload":{"delay_ms":150}}'
  open http://%s/ and send a write intent: its text grows in place

Context (fraud_check attaches the snapshot of its context_ref):
  switchboard context publish --entity user-1 --features '{"clicks_5m":3,"spend_1h":42.5}'%s
  curl -s%s http://%s/v1/contexts/user-1
  switchboard send --type fraud_check --payload '{"demo":{"delay_ms":0}}' --context-ref user-1 --wait 5s%s
    (the slow agent answers at once and echoes the context it received;
     the result's timeline names the snapshot's version)

Stop with Ctrl-C.
`, cluster.Bootstrap(), reg, httpAddr, httpAddr, httpAddr, httpAddr, auth, demoLines(cfg, demos),
		brokers, brokers, httpAddr, header, brokers,
		brokers, httpAddr, header, httpAddr,
		brokers, header, httpAddr, brokers)
}
