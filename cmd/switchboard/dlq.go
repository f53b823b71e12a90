package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/deadletter"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/schemas"
)

const dlqUsage = `Usage: switchboard dlq list|replay [flags]

  list    print the records of the dead-letter topic: where each came from,
          when, and why it was set aside
  replay  put selected records back on their original topic (or another),
          after the cause was fixed

Both read the topic once, to its end, and exit. Run
'switchboard dlq list --help' or 'switchboard dlq replay --help' for flags
and examples.
`

func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "replay") {
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
			fmt.Fprint(stdout, dlqUsage)
			return nil
		}
		fmt.Fprint(stderr, dlqUsage)
		return errUsage
	}
	if args[0] == "list" {
		return runDLQList(ctx, args[1:], stdout, stderr)
	}
	return runDLQReplay(ctx, args[1:], stdout, stderr)
}

// dlqSelection holds the flags that select dead letters, shared by list and
// replay.
type dlqSelection struct {
	conn                          *conn
	dlqTopic                      *string
	class, topic, since, until    *string
	partition, offsets, positions *string
	limit                         *int
}

func selectionFlags(fs *flag.FlagSet, withPositions bool) *dlqSelection {
	s := &dlqSelection{
		conn:      connFlags(fs),
		dlqTopic:  fs.String("dlq", "", "read this dead-letter `topic` (default: the config's topics.dead_letter)"),
		class:     fs.String("class", "", "only records of this error `class` (unroutable, invalid_intent, malformed_json, ...)"),
		topic:     fs.String("topic", "", "only records that came from this `topic`"),
		since:     fs.String("since", "", "only records dead-lettered at or after `when`: a time (2026-12-02T10:00:00Z, 2026-12-02) or a duration ago (90m)"),
		until:     fs.String("until", "", "only records dead-lettered before `when` (same forms as --since)"),
		partition: fs.String("partition", "", "only this dead-letter partition (`n`)"),
		offsets:   fs.String("offset", "", "only these dead-letter offsets: a `range` A-B, A-, -B or A (inclusive)"),
		limit:     fs.Int("limit", 0, "stop after `n` selected records (0: no limit)"),
	}
	if withPositions {
		s.positions = fs.String("offsets", "", "only the records at these dead-letter `positions`: partition:offset,... as 'dlq list' prints them")
	}
	return s
}

// filter turns the flags into a Filter; it reports the flag at fault.
func (s *dlqSelection) filter(now time.Time) (deadletter.Filter, error) {
	f := deadletter.NewFilter()
	f.Class, f.Topic = *s.class, *s.topic
	var err error
	if *s.since != "" {
		if f.Since, err = deadletter.ParseTime(*s.since, now); err != nil {
			return f, fmt.Errorf("--since: %w", err)
		}
	}
	if *s.until != "" {
		if f.Until, err = deadletter.ParseTime(*s.until, now); err != nil {
			return f, fmt.Errorf("--until: %w", err)
		}
	}
	if *s.partition != "" {
		var p int32
		if _, err := fmt.Sscan(*s.partition, &p); err != nil || p < 0 {
			return f, fmt.Errorf("--partition: %q is not a partition number", *s.partition)
		}
		f.Partition = &p
	}
	if *s.offsets != "" {
		if f.FromOffset, f.ToOffset, err = deadletter.ParseOffsetRange(*s.offsets); err != nil {
			return f, fmt.Errorf("--offset: %w", err)
		}
	}
	if s.positions != nil && *s.positions != "" {
		if f.Positions, err = deadletter.ParsePositions(*s.positions); err != nil {
			return f, fmt.Errorf("--offsets: %w", err)
		}
	}
	if *s.limit < 0 {
		return f, fmt.Errorf("--limit: %d is negative", *s.limit)
	}
	return f, nil
}

// read reads the selected letters, printing a progress line on stderr every
// few seconds of a long read.
func (s *dlqSelection) read(ctx context.Context, stderr io.Writer, f deadletter.Filter, fn func(*deadletter.Letter) error) (topic string, settings kafkaio.Settings, err error) {
	cfg, err := s.conn.load()
	if err != nil {
		return "", kafkaio.Settings{}, err
	}
	topic = cfg.Topics.DeadLetter
	if *s.dlqTopic != "" {
		topic = *s.dlqTopic
	}
	settings = s.conn.settings(cfg, "switchboard-dlq")
	started := time.Now()
	last := started
	progress := func(p deadletter.Progress) {
		if now := time.Now(); now.Sub(last) >= 2*time.Second {
			last = now
			fmt.Fprintf(stderr, "dlq: read %d of %d records of %s (%s)\n", p.Read, p.Total, topic, now.Sub(started).Round(time.Second))
		}
	}
	if err := deadletter.Read(ctx, settings, topic, f, *s.limit, progress, fn); err != nil {
		return topic, settings, fmt.Errorf("reading %s at %s: %w", topic, cfg.Kafka.BootstrapServers, err)
	}
	return topic, settings, nil
}

// dlqClasses explains the error classes the router writes.
var dlqClasses = fmt.Sprintf(`
  %-17s no route for its intent type, or an unknown target_agent
  %-17s a field of the intent is invalid
  %-17s an agent's response is invalid
  %s: the record could not be decoded`,
	router.ClassUnroutable, router.ClassInvalidIntent, router.ClassInvalidResponse,
	wrap(strings.Join([]string{
		schemas.ClassMalformedJSON, schemas.ClassMalformedAvro, schemas.ClassUnknownFormat, schemas.ClassEmpty,
		schemas.ClassTooLarge, schemas.ClassInvalidPayload, schemas.ClassUnknownSchema, schemas.ClassIncompatibleSchema,
		schemas.ClassNoRegistry, schemas.ClassRegistryUnavailable,
	}, ", "), 72, "\n  "))

// wrap breaks s at spaces into lines of at most width bytes, joined by sep.
func wrap(s string, width int, sep string) string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), sep)
}

func runDLQList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dlq list", "[flags]", `
Print the records of the dead-letter topic, read once from the beginning to
its end: for each, its position (partition:offset) in the dead-letter topic,
when it was dead-lettered, where it came from (topic[partition]@offset), the
error class and message, its key, and a preview of its value. Filters narrow
the list; they combine. With --json each record is one JSON object per line
with its value in full (base64, with "value_encoding":"base64", when it is not
UTF-8) and every header.

Error classes:`+dlqClasses+`.`, `  switchboard dlq list
  switchboard dlq list --class unroutable --since 1h
  switchboard dlq list --topic mcp.intent.request --limit 20
  switchboard dlq list --partition 0 --offset 100-200 --json | jq -r .value
  switchboard dlq list --config prod.yaml --since 2026-12-02T09:00:00Z --until 2026-12-02T10:00:00Z`, stderr)
	sel := selectionFlags(fs, false)
	asJSON := fs.Bool("json", false, "print each record as one JSON line, value in full")
	previewBytes := fs.Int("preview", 120, "show at most `n` bytes of each value in the table")
	if err := parse(fs, args); err != nil {
		return err
	}
	f, err := sel.filter(time.Now())
	if err != nil {
		return usageError(fs, err)
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	n := 0
	topic, _, err := sel.read(ctx, stderr, f, func(l *deadletter.Letter) error {
		if n == 0 && !*asJSON {
			fmt.Fprintln(stdout, deadletter.TableHeader)
		}
		n++
		if *asJSON {
			return enc.Encode(l)
		}
		return deadletter.WriteRow(stdout, l, *previewBytes)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "dlq: %d record(s) listed from %s\n", n, topic)
	return nil
}

func runDLQReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dlq replay", "--offsets P:O,... | --class C | ... | --all [--to TOPIC] [--dry-run]", `
Put selected records of the dead-letter topic back on the topic they came
from (or on --to TOPIC), once the cause is fixed: a route added for an
unroutable intent type, an agent's schema corrected, a bad field understood.
Each copy keeps the record's key, value and headers, without the
switchboard.original.* and switchboard.error.* headers, with
switchboard.replayed.from: <dlq topic>/<partition>/<offset>. It gets a new
timestamp, so a replayed intent's deadline counts from the replay. Replay
waits until the broker has acknowledged every copy, prints how many went
where, and exits 1 if any could not be sent. Nothing is asked: select with
the same filters as 'dlq list' (check the selection with 'dlq list' or
--dry-run first), or --all for the whole topic.

Replaying is not idempotent: replaying a record twice writes it twice. For
intent requests that is harmless while the router remembers the intent
(router.dedup_window): it drops a request whose intent_id is pending or was
resolved, so an intent is still answered once. A request the router rejected
is remembered only by the instance that rejected it, until it restarts: replay
after the routers run with the fix. Agent responses and other topics get every
copy.

A replayed record that fails again is dead-lettered again, with new headers:
nothing is lost, and 'dlq list' shows both.`, `  switchboard dlq replay --offsets 0:12,0:13 --dry-run
  switchboard dlq replay --offsets 0:12,0:13
  switchboard dlq replay --class unroutable --since 2h
  switchboard dlq replay --topic mcp.intent.request --partition 2 --offset 100-180 --to mcp.intent.request.retry
  switchboard dlq replay --config prod.yaml --all --dry-run`, stderr)
	sel := selectionFlags(fs, true)
	all := fs.Bool("all", false, "replay every record of the topic (when no filter is given)")
	to := fs.String("to", "", "replay to this `topic` instead of each record's original topic")
	dryRun := fs.Bool("dry-run", false, "print what would be replayed, and send nothing")
	if err := parse(fs, args); err != nil {
		return err
	}
	f, err := sel.filter(time.Now())
	if err != nil {
		return usageError(fs, err)
	}
	if !f.Selective() && *sel.limit == 0 && !*all {
		return usageError(fs, errors.New("select what to replay (--offsets, --class, --topic, --since, --until, --partition, --offset, --limit), or give --all"))
	}
	var letters []*deadletter.Letter
	_, settings, err := sel.read(ctx, stderr, f, func(l *deadletter.Letter) error {
		letters = append(letters, l)
		return nil
	})
	if err != nil {
		return err
	}
	if *dryRun {
		if len(letters) > 0 {
			fmt.Fprintln(stdout, deadletter.TableHeader)
		}
		for _, l := range letters {
			target, terr := deadletter.Target(l, *to)
			if terr != nil {
				target = "(cannot: " + terr.Error() + ")"
			}
			if err := deadletter.WriteRow(stdout, l, 120); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "           would go to: %s\n", target)
		}
		fmt.Fprintf(stdout, "dlq: would replay %d record(s) (dry run: nothing sent)\n", len(letters))
		return nil
	}
	if len(letters) == 0 {
		fmt.Fprintln(stdout, "dlq: replayed 0 records: none selected")
		return nil
	}
	p, err := kafkaio.NewProducer(settings)
	if err != nil {
		return err
	}
	defer p.Close(5 * time.Second)
	results := deadletter.Replay(ctx, p, letters, *to, 64)
	sent, failed := map[string]int{}, 0
	for _, r := range results {
		if r.Err != nil {
			failed++
			fmt.Fprintf(stderr, "dlq: %s: not replayed: %v\n", r.Letter.Position(), r.Err)
			continue
		}
		sent[r.Topic]++
	}
	topics := make([]string, 0, len(sent))
	for t := range sent {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		fmt.Fprintf(stdout, "dlq: replayed %d record(s) to %s\n", sent[t], t)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d record(s) could not be replayed (see above); the others were", failed, len(letters))
	}
	return nil
}

// usageError prints err and the usage, and returns errUsage (exit 2).
func usageError(fs *flag.FlagSet, err error) error {
	fmt.Fprintln(fs.Output(), err)
	fs.Usage()
	return errUsage
}
