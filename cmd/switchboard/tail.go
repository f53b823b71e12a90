package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

func runTail(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tail", "--topic results|timeouts|progress|dlq [flags]", `
Print the records of the results, timeouts, progress or dead-letter topic as they
arrive, one line each, until Ctrl-C. Every partition is read, without joining
a consumer group. With --json each line is the record as JSON (dead letters
as {"headers": {...}, "key": ..., "value": ...}). Keys and values that are
not printable text (Avro, say) are printed Go-quoted, control bytes escaped.

While the broker cannot be reached or the topic does not exist yet, it keeps
trying, and says so once; --give-up makes it exit instead.`, `  switchboard tail --topic results
  switchboard tail --topic dlq --from-beginning --json
  switchboard tail --topic timeouts --give-up 30s`, stderr)
	topic := fs.String("topic", "results", "`results`, timeouts, progress, dlq, or a topic name")
	fromBeginning := fs.Bool("from-beginning", false, "start at the beginning of the topic, not its end")
	asJSON := fs.Bool("json", false, "print each record as one JSON line")
	giveUp := fs.Duration("give-up", 0, "exit when the topic cannot be read for this `duration` (default: keep trying)")
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
	w := startWatch(ctx, stderr, *giveUp, fmt.Sprintf("cannot read %s at %s (is Kafka running there, and does the topic exist?)", name, cfg.Kafka.BootstrapServers))
	from := kafkaio.FromEnd()
	if *fromBeginning {
		from = kafkaio.FromBeginning()
	}
	err = kafkaio.Read(w.ctx, c.settings(cfg, "switchboard-tail"), kafkaio.Reading{Topics: []string{name}, From: from, OnStart: func(kafkaio.Offsets) {
		w.reading(fmt.Sprintf("reading %s from %s at %s (Ctrl-C to stop)", name, map[bool]string{true: "the beginning", false: "the end"}[*fromBeginning], cfg.Kafka.BootstrapServers))
	}}, func(rec *port.Record) error {
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
				h[port.HeaderOriginalTopic], h[port.HeaderOriginalPartition], h[port.HeaderOriginalOffset],
				h[port.HeaderErrorClass], h[port.HeaderErrorMessage], clip(printable(rec.Value), 200))
			return err
		default:
			return printRaw(stdout, rec, nil)
		}
	})
	if w.stop() {
		return fmt.Errorf("gave up after %s: %s", *giveUp, w.what)
	}
	return err
}

func printRaw(w io.Writer, rec *port.Record, err error) error {
	note := ""
	if err != nil {
		note = "  (" + err.Error() + ")"
	}
	_, werr := fmt.Fprintf(w, "%s  [%d]@%d  %s  %s%s\n", stamp(rec), rec.Partition, rec.Offset, printable(rec.Key), clip(printable(rec.Value), 200), note)
	return werr
}

func stamp(rec *port.Record) string {
	return time.UnixMilli(rec.TimestampMs).Format("15:04:05.000")
}

// printable is b as text when it is printable UTF-8 text, else Go-quoted
// (control bytes and invalid UTF-8 escaped): a binary record must not write
// escape sequences to the terminal.
func printable(b []byte) string {
	s := string(b)
	if !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) && r != ' ' && r != '\n' && r != '\t' {
			return strconv.Quote(s)
		}
	}
	return s
}

// tailWatch says once, on stderr, that the topic cannot be read yet (after
// tailNoticeAfter), and ends ctx after giveUp (0: never).
type tailWatch struct {
	ctx    context.Context
	cancel context.CancelFunc
	what   string
	mu     sync.Mutex
	w      io.Writer
	ok     bool // reading
	gaveUp bool
	done   chan struct{}
}

// tailNoticeAfter is how long tail tries before saying it cannot read yet.
var tailNoticeAfter = 5 * time.Second

func startWatch(ctx context.Context, w io.Writer, giveUp time.Duration, what string) *tailWatch {
	t := &tailWatch{what: what, w: w, done: make(chan struct{})}
	t.ctx, t.cancel = context.WithCancel(ctx)
	go func() {
		defer close(t.done)
		notice := time.NewTimer(tailNoticeAfter)
		defer notice.Stop()
		var expire <-chan time.Time
		if giveUp > 0 {
			g := time.NewTimer(giveUp)
			defer g.Stop()
			expire = g.C
		}
		for {
			select {
			case <-t.ctx.Done():
				return
			case <-notice.C:
				t.mu.Lock()
				if !t.ok {
					hint := "still trying; Ctrl-C to stop, or --give-up DURATION to exit instead"
					if giveUp > 0 {
						hint = fmt.Sprintf("still trying, up to %s (--give-up)", giveUp)
					}
					fmt.Fprintf(t.w, "%s; %s\n", what, hint)
				}
				t.mu.Unlock()
			case <-expire:
				t.mu.Lock()
				if !t.ok {
					t.gaveUp = true
					t.cancel()
				}
				t.mu.Unlock()
				return
			}
		}
	}()
	return t
}

// reading says the topic is being read: no notice, no giving up from now on.
func (t *tailWatch) reading(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ok = true
	fmt.Fprintln(t.w, line)
}

// stop ends the watch and reports whether it gave up.
func (t *tailWatch) stop() bool {
	t.cancel()
	<-t.done
	return t.gaveUp
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
