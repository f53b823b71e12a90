package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/schemas"
)

func runTail(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tail", "--topic results|timeouts|progress|dlq [flags]", `
Print the records of the results, timeouts, progress or dead-letter topic as they
arrive, one line each, until Ctrl-C. Every partition is read, without joining
a consumer group. With --json each line is the record as JSON (dead letters
as {"headers": {...}, "key": ..., "value": ...}).`, `  switchboard tail --topic results
  switchboard tail --topic dlq --from-beginning --json`, stderr)
	topic := fs.String("topic", "results", "`results`, timeouts, progress, dlq, or a topic name")
	fromBeginning := fs.Bool("from-beginning", false, "start at the beginning of the topic, not its end")
	asJSON := fs.Bool("json", false, "print each record as one JSON line")
	c := connFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := c.load()
	if err != nil {
		return err
	}
	codec, err := c.codec(cfg)
	if err != nil {
		return err
	}
	name, kind := *topic, *topic
	switch *topic {
	case "results":
		name = cfg.Topics.Results
	case "timeouts":
		name = cfg.Topics.Timeouts
	case "progress":
		name = cfg.Topics.Progress
	case "dlq", "dead_letter":
		name, kind = cfg.Topics.DeadLetter, "dlq"
	default:
		switch name {
		case cfg.Topics.Results:
			kind = "results"
		case cfg.Topics.Timeouts:
			kind = "timeouts"
		case cfg.Topics.Progress:
			kind = "progress"
		case cfg.Topics.DeadLetter:
			kind = "dlq"
		}
	}
	enc := json.NewEncoder(stdout)
	return kafkaio.Tail(ctx, c.settings(cfg, "switchboard-tail"), name, *fromBeginning, func() {
		fmt.Fprintf(stderr, "reading %s from %s at %s (Ctrl-C to stop)\n", name, map[bool]string{true: "the beginning", false: "the end"}[*fromBeginning], cfg.Kafka.BootstrapServers)
	}, func(rec *router.Record) error {
		switch kind {
		case "results":
			var r schemas.IntentResult
			if err := codec.Decode(rec.Value, &r); err != nil {
				return printRaw(stdout, rec, err)
			}
			if *asJSON {
				return enc.Encode(&r)
			}
			answer := ""
			if r.Answer != nil {
				answer = string(*r.Answer)
			} else if r.Error != nil {
				answer = r.Error.Code + ": " + r.Error.Message
			}
			_, err := fmt.Fprintf(stdout, "%s  %-36s  %-16s %-16s %s\n", stamp(rec), r.IntentID, r.IntentType, r.Outcome, answer)
			return err
		case "progress":
			var p schemas.IntentProgress
			if err := codec.Decode(rec.Value, &p); err != nil {
				return printRaw(stdout, rec, err)
			}
			if *asJSON {
				return enc.Encode(&p)
			}
			_, err := fmt.Fprintf(stdout, "%s  %-36s  %s\n", stamp(rec), p.IntentID, progressLine(&p))
			return err
		case "timeouts":
			var t schemas.IntentTimeout
			if err := codec.Decode(rec.Value, &t); err != nil {
				return printRaw(stdout, rec, err)
			}
			if *asJSON {
				return enc.Encode(&t)
			}
			_, err := fmt.Fprintf(stdout, "%s  %-36s  %-16s reason=%s fallback=%s elapsed=%dms\n", stamp(rec), t.IntentID, t.IntentType, t.Reason, t.Fallback, t.ElapsedMs)
			return err
		case "dlq":
			h := map[string]string{}
			for _, x := range rec.Headers {
				h[x.Key] = string(x.Value)
			}
			if *asJSON {
				return enc.Encode(map[string]any{"headers": h, "key": string(rec.Key), "value": string(rec.Value)})
			}
			_, err := fmt.Fprintf(stdout, "%s  %s[%s]@%s  %s: %s\n    value: %s\n", stamp(rec),
				h[router.HeaderOriginalTopic], h[router.HeaderOriginalPartition], h[router.HeaderOriginalOffset],
				h[router.HeaderErrorClass], h[router.HeaderErrorMessage], clip(string(rec.Value), 200))
			return err
		default:
			return printRaw(stdout, rec, nil)
		}
	})
}

func printRaw(w io.Writer, rec *router.Record, err error) error {
	note := ""
	if err != nil {
		note = "  (" + err.Error() + ")"
	}
	_, werr := fmt.Fprintf(w, "%s  [%d]@%d  %s  %s%s\n", stamp(rec), rec.Partition, rec.Offset, rec.Key, clip(string(rec.Value), 200), note)
	return werr
}

func stamp(rec *router.Record) string {
	return time.UnixMilli(rec.TimestampMs).Format("15:04:05.000")
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
