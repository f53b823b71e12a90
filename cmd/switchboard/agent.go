package main

import (
	"context"
	"fmt"
	"io"

	"github.com/switchboard-mcp/switchboard/intents/client"
	"github.com/switchboard-mcp/switchboard/router/telemetry"
)

func runAgent(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := newFlags("agent", "--name N [flags]", `
Run a demo agent: it reads AgentRequest records from its topic and answers
each with {"agent": N, "echo": <payload>} on the responses topic, after
--delay, failing a fraction --error-rate of intents with a retryable error.
It joins the agent's consumer group (agents.<name>.group_id, default
switchboard-agent-<name>), whose lag the router reports.
With --writer it is the writer instead: it streams its answer word by word
as progress (payload {"text", "words", "delay_ms"}), then answers.
It is also a working example of an agent (intents/client in Go; the README
shows the same in a few lines of Python and kcat).`, `  switchboard agent --name echo
  switchboard agent --name slow --delay 1s --error-rate 0.1
  switchboard agent --name writer --writer`, stderr)
	name := fs.String("name", "", "the agent's `name` (required)")
	topic := fs.String("topic", "", "the `topic` to read requests from (default: the config's, else mcp.agent.<name>.request)")
	delay := fs.Duration("delay", 0, "how long each answer takes")
	errorRate := fs.Float64("error-rate", 0, "the `fraction` of intents to fail, 0 to 1")
	concurrency := fs.Int("concurrency", 64, "how many intents it serves at once (a `number`)")
	writer := fs.Bool("writer", false, "be the writer demo agent: stream the answer word by word as progress")
	c := connFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if *name == "" {
		fmt.Fprintln(stderr, "--name is required")
		fs.Usage()
		return errUsage
	}
	if *errorRate < 0 || *errorRate > 1 {
		return fmt.Errorf("--error-rate %v is not between 0 and 1", *errorRate)
	}
	cfg, err := c.load()
	if err != nil {
		return err
	}
	codec, err := c.codec(cfg)
	if err != nil {
		return err
	}
	group := "" // the client's default, switchboard-agent-<name>
	if a := cfg.Agents[*name]; a != nil {
		group = a.GroupID
		if *topic == "" {
			*topic = a.Topic
		}
	}
	log := newLogger(stderr, cfg.Log.Level, cfg.Log.Format)
	traces, err := telemetry.New(cfg.Telemetry.Traces, telemetry.WithComponent("agent", *name))
	if err != nil {
		return err
	}
	defer traces.Flush(log)
	h := client.DemoHandler(*name, *delay, *errorRate, nil)
	if *writer {
		h = client.WriterHandler(*name, nil)
	}
	a, err := client.NewAgent(client.AgentConfig{
		Name: *name, Topic: *topic, GroupID: group, ResponsesTopic: cfg.Topics.Responses, Concurrency: *concurrency,
		Kafka: c.settings(cfg, "switchboard-agent-"+*name), Codec: codec, Logger: log,
		TracerProvider: traces.OrNil(),
	}, h)
	if err != nil {
		return err
	}
	log.Info("demo agent running", "agent", *name, "kafka", cfg.Kafka.BootstrapServers, "delay", *delay, "error_rate", *errorRate)
	return a.Run(ctx)
}
