package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/intents/client"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/schemas"
)

func runSend(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("send", "--type T --payload JSON [flags]", `
Publish one intent to the requests topic. Without --wait it prints the intent
id; with --wait it waits for the intent's result and prints it as one JSON
line (exit 0), or fails when no result arrives in time (exit 1). With
--follow it also prints the agent's progress as it comes, one line each
(progress <sequence> [<progress>/<total>] [<message>] [<partial>]), before
the result.`, `  switchboard send --type echo --payload '{"q":1}' --wait 5s
  switchboard send --type write --payload '{"words":12,"delay_ms":100}' --follow
  switchboard send --type fraud_check --payload '{"amount":1}' --context-ref user-1 --wait 5s
  switchboard send --config prod.yaml --type summarize --payload @doc.json --session s-42`, stderr)
	typ := fs.String("type", "", "the intent `type` (required)")
	payload := fs.String("payload", "{}", "the payload, a JSON `document`, or @FILE to read it from a file (@- for stdin)")
	id := fs.String("id", "", "the intent `id` (default: a new UUIDv7)")
	contextRef := fs.String("context-ref", "", "the `entity` id whose context the intent concerns (also its fallback cache key)")
	session := fs.String("session", "", "a session `id` to group intents by")
	tenant := fs.String("tenant", "", "the `tenant` the intent belongs to")
	timeout := fs.Duration("timeout", 0, "ask for this `timeout` instead of the intent type's")
	wait := fs.Duration("wait", 0, "wait up to this `duration` for the result and print it")
	follow := fs.Bool("follow", false, "print the agent's progress, then the result (waits up to --wait, default 60s)")
	publishTimeout := fs.Duration("publish-timeout", 5*time.Second, "give up publishing when the broker has not acknowledged the intent within this `duration`")
	c := connFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if *typ == "" {
		fmt.Fprintln(stderr, "--type is required")
		fs.Usage()
		return errUsage
	}
	if *follow && *wait <= 0 {
		*wait = time.Minute
	}
	cfg, err := c.load()
	if err != nil {
		return err
	}
	codec, err := c.codec(cfg)
	if err != nil {
		return err
	}
	body, err := payloadArg(*payload, os.Stdin)
	if err != nil {
		return err
	}
	req := &schemas.IntentRequest{IntentID: *id, IntentType: *typ, Payload: schemas.JSON(body)}
	if req.IntentID == "" {
		req.IntentID = intents.NewID()
	}
	opt := func(v string) *string {
		if v == "" {
			return nil
		}
		return &v
	}
	req.ContextRef, req.SessionID, req.Tenant = opt(*contextRef), opt(*session), opt(*tenant)
	if *timeout > 0 {
		req.TimeoutMs = schemas.Ptr(timeout.Milliseconds())
	}
	if err := intents.Validate(req); err != nil {
		var fe *intents.FieldError
		if errors.As(err, &fe) {
			return fmt.Errorf("%s: %s (flag --%s)", fe.Field, fe.Reason, flagOf(fe.Field))
		}
		return err
	}
	// The producer gives up on the record after --publish-timeout (librdkafka's
	// message.timeout.ms): with the broker down, send fails in seconds, not
	// after librdkafka's default of five minutes.
	ps := c.settings(cfg, "switchboard-send")
	ps.Properties = withDefaults(map[string]string{"message.timeout.ms": fmt.Sprint(publishTimeout.Milliseconds())}, ps.Properties)
	pub, err := client.NewPublisher(ps, codec, cfg.Topics.Requests)
	if err != nil {
		return err
	}
	defer pub.Close()

	published := false
	publish := func() error {
		pctx, cancel := context.WithTimeout(ctx, *publishTimeout+5*time.Second)
		defer cancel()
		if err := pub.Publish(pctx, req); err != nil {
			return publishError(err, cfg, *publishTimeout)
		}
		published = true
		return nil
	}
	if *wait <= 0 {
		if err := publish(); err != nil {
			return err
		}
		return json.NewEncoder(stdout).Encode(map[string]string{"intent_id": req.IntentID})
	}
	wctx, wcancel := context.WithTimeout(ctx, *wait)
	defer wcancel()
	var res *schemas.IntentResult
	if *follow {
		res, err = client.Follow(wctx, c.settings(cfg, "switchboard-send"), codec, cfg.Topics.Results, cfg.Topics.Progress, intents.TenantOf(req.Tenant), req.IntentID, publish,
			func(p *schemas.IntentProgress) { fmt.Fprintln(stdout, progressLine(p)) })
	} else {
		res, err = client.Await(wctx, c.settings(cfg, "switchboard-send"), codec, cfg.Topics.Results, intents.TenantOf(req.Tenant), req.IntentID, publish)
	}
	if err != nil {
		return awaitError(err, req.IntentID, published, cfg, c.registryURL(cfg), *wait)
	}
	return json.NewEncoder(stdout).Encode(res)
}

// publishError says in one line why the intent was not published.
func publishError(err error, cfg *config.Config, timeout time.Duration) error {
	var kerr kafka.Error
	switch {
	case errors.Is(err, schemas.ErrRegistryUnavailable), errors.Is(err, schemas.ErrIncompatibleSchema):
		return fmt.Errorf("nothing published: the schema registry at %s: %w", cfg.SchemaRegistry.URL, err)
	case errors.As(err, &kerr) && kerr.Code() == kafka.ErrMsgTimedOut, errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("nothing published: the broker at %s did not acknowledge the intent within %s (--publish-timeout): is Kafka running there? (--brokers, or kafka.bootstrap_servers of --config, names it)", cfg.Kafka.BootstrapServers, timeout)
	}
	return fmt.Errorf("nothing published to %s at %s: %w", cfg.Topics.Requests, cfg.Kafka.BootstrapServers, err)
}

// awaitError tells apart why send --wait has no result: it could not read
// the results topic (so published nothing), it could not publish, the result
// came but could not be decoded, or no result came in time (only then is a
// stopped router the likely cause).
func awaitError(err error, id string, published bool, cfg *config.Config, registry string, wait time.Duration) error {
	switch {
	case errors.Is(err, client.ErrUndecodableResult):
		return fmt.Errorf("the result of intent %s arrived but could not be decoded (the router answered; check the schema registry at %s, or --registry): %w", id, registry, err)
	case !published && (errors.Is(err, client.ErrNoResult) || errors.Is(err, context.DeadlineExceeded)):
		return fmt.Errorf("nothing published: could not read %s at %s within %s: is Kafka running there? (--brokers, or kafka.bootstrap_servers of --config, names it)", cfg.Topics.Results, cfg.Kafka.BootstrapServers, wait)
	case !published:
		return err // publishError's
	case errors.Is(err, client.ErrNoResult) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("intent %s published, but no result within %s (is the router running? try 'switchboard tail --topic dlq')", id, wait)
	}
	return err
}

// progressLine is how send --follow prints one progress record:
// progress <sequence> [<progress>/<total>] [<message>] [<partial>].
func progressLine(p *schemas.IntentProgress) string {
	var b strings.Builder
	fmt.Fprintf(&b, "progress %d", p.Sequence)
	switch {
	case p.Progress != nil && p.Total != nil:
		fmt.Fprintf(&b, " %g/%g", *p.Progress, *p.Total)
	case p.Progress != nil:
		fmt.Fprintf(&b, " %g", *p.Progress)
	}
	if p.Message != nil {
		fmt.Fprintf(&b, " %s", *p.Message)
	}
	if p.Partial != nil {
		fmt.Fprintf(&b, " %s", *p.Partial)
	}
	return b.String()
}

// payloadArg is --payload: the JSON itself, or @FILE (@- for stdin), as the
// help says and as curl does.
func payloadArg(v string, stdin io.Reader) ([]byte, error) {
	if !strings.HasPrefix(v, "@") {
		return []byte(v), nil
	}
	var b []byte
	var err error
	if v == "@-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(v[1:])
	}
	if err != nil {
		return nil, fmt.Errorf("--payload %s: %w", v, err)
	}
	return bytes.TrimSpace(b), nil
}

func flagOf(field string) string {
	switch field {
	case "intent_type":
		return "type"
	case "intent_id":
		return "id"
	case "context_ref":
		return "context-ref"
	case "session_id":
		return "session"
	case "timeout_ms":
		return "timeout"
	}
	return field
}
