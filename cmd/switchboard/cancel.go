package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/intents/client"
)

func runCancel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cancel", "ID [--reason TEXT] [flags]", `
Ask Switchboard to cancel a pending intent: publish a cancel record to the
requests topic (key ID, header switchboard.control=cancel, value
{"intent_id":ID,"reason":TEXT,"tenant":T}). The router resolves the intent
"cancelled" if it is still pending and tells its agent to stop; an intent
that has already resolved keeps its result. Intents are namespaced by tenant:
without --tenant it cancels the intent ID that has no tenant, never a
tenant's. It prints {"intent_id":ID,"status":"cancel_requested"} once the
broker has the record.`, `  switchboard cancel 0193f1c2-7d4e-7a80-9c1b-2f5e8d3a6b01
  switchboard cancel --reason "user closed the tab" 0193f1c2-7d4e-7a80-9c1b-2f5e8d3a6b01
  switchboard cancel --tenant acme 0193f1c2-7d4e-7a80-9c1b-2f5e8d3a6b01
  ID=$(switchboard send --type summarize --payload '{"doc":"…"}' | jq -r .intent_id)
  switchboard cancel --config prod.yaml "$ID"`, stderr)
	reason := fs.String("reason", "", "why (optional): a `text` for the result and the agent")
	tenant := fs.String("tenant", "", "the `tenant` whose intent it is (none: the intent without a tenant)")
	c := connFlags(fs)
	id, err := parseWithArg(fs, args)
	if err != nil {
		return err
	}
	if id == "" {
		fmt.Fprintln(stderr, "the intent id is required")
		fs.Usage()
		return errUsage
	}
	if !intents.ValidID(id) {
		return fmt.Errorf("%q is not a valid intent id", id)
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
	pub, err := client.NewPublisher(c.settings(cfg, "switchboard-cancel"), codec, cfg.Topics.Requests)
	if err != nil {
		return err
	}
	defer pub.Close()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := pub.PublishCancel(pctx, intents.Cancel{IntentID: id, Reason: *reason, Tenant: *tenant}); err != nil {
		return fmt.Errorf("publishing the cancel to %s at %s: %w", cfg.Topics.Requests, cfg.Kafka.BootstrapServers, err)
	}
	return json.NewEncoder(stdout).Encode(map[string]string{"intent_id": id, "status": "cancel_requested"})
}

// parseWithArg parses flags around at most one positional argument, which may
// come before, between or after the flags, and returns it ("" if none).
func parseWithArg(fs *flag.FlagSet, args []string) (string, error) {
	var arg string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return "", err
			}
			return "", errUsage
		}
		if fs.NArg() == 0 {
			return arg, nil
		}
		if arg != "" {
			fmt.Fprintf(fs.Output(), "unexpected argument %q\n", fs.Arg(0))
			fs.Usage()
			return "", errUsage
		}
		arg, args = fs.Arg(0), fs.Args()[1:]
	}
}
