package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/intents/client"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/embedded"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
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
deploy/examples/switchboard.yaml.

The API runs without authentication (any caller, every tenant's results),
and says so; --auth enforces the config's http.auth instead, to try API keys
and JWTs locally.`, `  switchboard dev
  switchboard dev --kafka-port 19092 --http 127.0.0.1:18080`, stderr)
	path := fs.String("config", "", "a YAML configuration `file` (default: the built-in example)")
	kafkaPort := fs.Int("kafka-port", 9092, "the embedded broker's `port` on 127.0.0.1 (0 picks a free one)")
	registry := fs.String("registry", "127.0.0.1:8081", "the schema registry's listen `address`; empty for none (then records are JSON)")
	httpAddr := fs.String("http", "", "the API's listen `address` (default: http.listen of the config)")
	agents := fs.Bool("agents", true, "run the demo agents")
	withAuth := fs.Bool("auth", false, "enforce http.auth of the config (default: no authentication)")
	if err := parse(fs, args); err != nil {
		return err
	}
	var (
		cfg *config.Config
		err error
	)
	if *path != "" {
		cfg, err = config.Load(*path)
	} else {
		cfg, err = config.Parse("built-in dev config", devConfig, os.LookupEnv)
	}
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
	if err != nil {
		return fmt.Errorf("%w (is another 'switchboard dev' or a Kafka broker running? try --kafka-port 0)", err)
	}
	defer cluster.Close()
	cfg.Kafka.BootstrapServers = cluster.Bootstrap()
	cfg.SchemaRegistry.URL = cluster.RegistryURL()

	if _, err := kafkaio.EnsureTopics(ctx, settingsOf(cfg, "switchboard-dev"), cfg.TopicPlans(), true); err != nil {
		return err
	}
	n, err := newNode(cfg, apiCfg, log)
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
	if *agents {
		names := make([]string, 0, len(cfg.Agents))
		for name := range cfg.Agents {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			a, err := client.NewAgent(client.AgentConfig{
				Name: name, Topic: cfg.Agents[name].Topic, GroupID: cfg.Agents[name].GroupID, ResponsesTopic: cfg.Topics.Responses,
				Kafka: settingsOf(cfg, "switchboard-agent-"+name), Codec: n.codec, Logger: log,
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
	}
	select {
	case <-n.api.Ready():
		printDevBanner(stdout, cfg, n.api.Addr(), cluster, *kafkaPort, apiCfg.Auth.Required)
	case <-ctx.Done():
	}
	wg.Wait()
	return nodeErr
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

func printDevBanner(w io.Writer, cfg *config.Config, httpAddr string, cluster *embedded.Cluster, askedPort int, authOn bool) {
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
	fmt.Fprintf(w, `
Switchboard dev is running.
  Kafka (embedded)   %s
  Schema Registry    %s
  HTTP API           http://%s   (metrics at /metrics)
  WebSocket          ws://%s/v1/stream
  MCP                http://%s/mcp   (every intent type is a tool; stdio: switchboard mcp --url http://%s/mcp)
  Authentication     %s
  demo agents        %d (slow answers after %s; writer streams)

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
`, cluster.Bootstrap(), reg, httpAddr, httpAddr, httpAddr, httpAddr, auth, len(cfg.Agents), slowDelay,
		brokers, brokers, httpAddr, header, brokers,
		brokers, httpAddr, header, httpAddr,
		brokers, header, httpAddr, brokers)
}
