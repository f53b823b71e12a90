package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
)

func runTopics(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "acls" {
		return runTopicsACLs(ctx, args[1:], stdout, stderr)
	}
	if len(args) == 0 || (args[0] != "create" && args[0] != "check") {
		fmt.Fprint(stderr, `Usage: switchboard topics create|check|acls --config FILE

  create  create every topic the configuration uses that does not exist yet
  check   only compare: report what is missing or conflicts
  acls    print or apply the Kafka ACLs the router, the API and agents need

Both report each topic as created, matched, missing or conflict, and exit 1 on
a conflict: a topic that exists with another partition count, replication
factor, cleanup policy, retention or max.message.bytes. Switchboard never
alters an existing topic.
`)
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-h") {
			return nil
		}
		return errUsage
	}
	verb := args[0]
	fs := newFlags("topics "+verb, "--config FILE", `
`+map[string]string{
		"create": "Create every topic the configuration uses that does not exist yet, with the\npartitions, replication factor, cleanup policy, retention and\nmax.message.bytes of its topics section, and report each topic.",
		"check":  "Compare every topic the configuration uses with the cluster, and report each\ntopic as matched, missing or conflict.",
	}[verb], `  switchboard topics `+verb+` --config deploy/examples/switchboard.yaml`, stderr)
	c := connFlags(fs)
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	cfg, err := c.load()
	if err != nil {
		return err
	}
	return ensureTopics(ctx, cfg, verb == "create", stdout)
}

// errTopicConflict is returned when an existing topic does not match.
var errTopicConflict = errors.New("topics conflict with the configuration")

// ensureTopics prints the report of kafkaio.EnsureTopics as a table.
func ensureTopics(ctx context.Context, cfg *config.Config, create bool, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	reports, err := kafkaio.EnsureTopics(ctx, settingsOf(cfg, "switchboard-topics"), cfg.TopicPlans(), create)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tTOPIC\tROLE\tPARTITIONS\tRF\tSETTINGS")
	conflicts := 0
	for _, r := range reports {
		detail := settingsLine(r.Plan)
		if r.Status == kafkaio.TopicConflict {
			conflicts++
			detail = strings.Join(r.Conflicts, "; ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", r.Status, r.Plan.Name, r.Plan.Role, r.Plan.Partitions, r.Plan.ReplicationFactor, detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if conflicts > 0 {
		return fmt.Errorf("%w: %d topic(s) differ; change the topic or the config (Switchboard never alters an existing topic)", errTopicConflict, conflicts)
	}
	return nil
}

func settingsLine(p config.TopicPlan) string {
	m := p.Configs()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, " ")
}
