package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/intents/client"
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
	payload := fs.String("payload", "{}", "the payload, a JSON `document`")
	id := fs.String("id", "", "the intent `id` (default: a new UUIDv7)")
	contextRef := fs.String("context-ref", "", "the `entity` id whose context the intent concerns (also its fallback cache key)")
	session := fs.String("session", "", "a session `id` to group intents by")
	tenant := fs.String("tenant", "", "the `tenant` the intent belongs to")
	timeout := fs.Duration("timeout", 0, "ask for this `timeout` instead of the intent type's")
	wait := fs.Duration("wait", 0, "wait up to this `duration` for the result and print it")
	follow := fs.Bool("follow", false, "print the agent's progress, then the result (waits up to --wait, default 60s)")
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
	req := &schemas.IntentRequest{IntentID: *id, IntentType: *typ, Payload: schemas.JSON(*payload)}
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
	pub, err := client.NewPublisher(c.settings(cfg, "switchboard-send"), codec, cfg.Topics.Requests)
	if err != nil {
		return err
	}
	defer pub.Close()

	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	publish := func() error {
		if err := pub.Publish(pctx, req); err != nil {
			return fmt.Errorf("publishing to %s at %s: %w", cfg.Topics.Requests, cfg.Kafka.BootstrapServers, err)
		}
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
		res, err = client.Follow(wctx, c.settings(cfg, "switchboard-send"), codec, cfg.Topics.Results, cfg.Topics.Progress, req.IntentID, publish,
			func(p *schemas.IntentProgress) { fmt.Fprintln(stdout, progressLine(p)) })
	} else {
		res, err = client.Await(wctx, c.settings(cfg, "switchboard-send"), codec, cfg.Topics.Results, req.IntentID, publish)
	}
	if err != nil {
		if errors.Is(err, client.ErrNoResult) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("no result for intent %s within %s (is the router running? try 'switchboard tail --topic dlq')", req.IntentID, *wait)
		}
		return err
	}
	return json.NewEncoder(stdout).Encode(res)
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
