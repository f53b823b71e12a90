package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
)

// listFlag is a flag that may be given more than once.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func runTopicsACLs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("topics acls", "--config FILE [--router P] [--api P] [--agent NAME=P]... [--print|--apply]", `
Print, or apply, the least Kafka ACLs each of Switchboard's principals needs
on a cluster with an authorizer, for the topics, groups and transactional
ids of the configuration:

  --router  'serve''s router: its group, its topics (read requests and
            responses; write results, timeouts, progress, dead letters, the
            pending changelog, the fallback cache, agents' topics), its
            transactional ids (exactly_once), the agents' lag
  --api     'serve''s API side, and send, cancel and tail: write requests,
            read results, timeout events and progress. 'serve' runs both
            in one process: give its principal --router and --api
  --agent   an agent: read its own topic in its own group, write responses

A principal is type:name, e.g. User:router (SASL: User:<sasl.username>).
--apply creates the rules with the credentials of the configuration (or of
SWITCHBOARD_KAFKA_SASL_USERNAME/PASSWORD): an admin's; rules that exist are
left as they are and nothing is removed.`, `  switchboard topics acls --config switchboard.yaml --router User:switchboard --api User:switchboard \
    --agent echo=User:agent-echo --print
  SWITCHBOARD_KAFKA_SASL_USERNAME=admin SWITCHBOARD_KAFKA_SASL_PASSWORD=… \
    switchboard topics acls --config switchboard.yaml --router User:switchboard --api User:switchboard --apply`, stderr)
	c := connFlags(fs)
	routerP := fs.String("router", "", "the router's `principal`")
	apiP := fs.String("api", "", "the API side's `principal`")
	var agents, instances listFlag
	fs.Var(&agents, "agent", "an agent and its principal, `NAME=PRINCIPAL` (repeat for each agent)")
	fs.Var(&instances, "instance", "a router instance `id` (router.instance_id; repeat): literal transactional ids instead of one prefixed rule")
	printOnly := fs.Bool("print", false, "print the rules (the default)")
	apply := fs.Bool("apply", false, "create the rules on the cluster, then print them")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *printOnly && *apply {
		fmt.Fprintln(stderr, "--print and --apply: choose one")
		return errUsage
	}
	p := config.Principals{Router: *routerP, API: *apiP, Agents: map[string]string{}, Instances: instances}
	for _, a := range agents {
		name, principal, ok := strings.Cut(a, "=")
		if !ok || name == "" || principal == "" {
			fmt.Fprintf(stderr, "--agent %q: want NAME=PRINCIPAL, e.g. echo=User:agent-echo\n", a)
			return errUsage
		}
		p.Agents[name] = principal
	}
	if p.Router == "" && p.API == "" && len(p.Agents) == 0 {
		fmt.Fprintln(stderr, "name at least one principal: --router, --api or --agent")
		fs.Usage()
		return errUsage
	}
	cfg, err := c.load()
	if err != nil {
		return err
	}
	acls, err := cfg.ACLs(p)
	if err != nil {
		return err
	}
	if *apply {
		actx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := kafkaio.ApplyACLs(actx, settingsOf(cfg, "switchboard-acls"), acls); err != nil {
			return err
		}
	}
	return printACLs(stdout, acls, *apply)
}

// printACLs writes the rules as a table.
func printACLs(w io.Writer, acls []config.ACL, applied bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PRINCIPAL\tALLOW\tRESOURCE\tPATTERN\tNAME\tFOR")
	for _, a := range acls {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.Principal, a.Operation, a.ResourceType, a.PatternType, a.Name, a.Why)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if applied {
		_, err := fmt.Fprintf(w, "applied: %d rules (those that existed already are unchanged)\n", len(acls))
		return err
	}
	return nil
}
