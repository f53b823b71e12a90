package lookup_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/lookup"
	"github.com/switchboard-mcp/switchboard/api/lookup/lookuptest"
)

// logLines records what a Materializer logs.
type logLines struct {
	mu    sync.Mutex
	lines []slog.Record
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logLines) WithGroup(string) slog.Handler            { return l }

func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, r.Clone())
	return nil
}

// naming returns the lines at level or above whose message or attributes
// name topic.
func (l *logLines) naming(level slog.Level, topic string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.lines {
		if r.Level < level {
			continue
		}
		line := r.Message
		r.Attrs(func(a slog.Attr) bool {
			line += " " + a.String()
			return true
		})
		if strings.Contains(line, "topic="+topic) {
			out = append(out, r.Level.String()+" "+line)
		}
	}
	return out
}

// A topic the Materializer cannot read (here the progress topic, missing
// with nothing to create it) keeps the instance not ready: readiness names
// the topic and why, one warning says so however long it lasts, and once
// the topic is there the store catches up and says it can read it.
func TestATopicThatCannotBeReadIsReportedNotWaitedOnSilently(t *testing.T) {
	e := newEnv(t)
	e.src = lookuptest.NewSource()
	e.src.CreateTopic(topicResults, "id-results", 3)
	e.src.CreateTopic(topicTimeouts, "id-timeouts", 3)
	e.src.CreateTopic(topicPending, "id-pending", 3)
	logs := &logLines{}
	var err error
	if e.store, err = lookup.Open(e.dir, lookup.WithLogger(slog.New(slog.DiscardHandler))); err != nil {
		t.Fatal(err)
	}
	e.live = &recordingLive{}
	e.m, err = lookup.NewMaterializer(lookup.Config{
		Results: topicResults, Timeouts: topicTimeouts, Pending: topicPending, Progress: topicProgress,
		Store: e.store, Source: e.src, Codec: e.codec, Live: e.live, Clock: e.clock, Logger: slog.New(logs),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done = cancel, make(chan error, 1)
	go func() { e.done <- e.m.Run(ctx) }()

	e.waitFor("readiness to name the progress topic", func() bool {
		err := e.m.Ready()
		return err != nil && strings.Contains(err.Error(), "topic "+topicProgress)
	})
	if err := e.m.Ready(); !errors.Is(err, api.ErrLookupCatchingUp) {
		t.Fatalf("Ready: %v, want it to wrap api.ErrLookupCatchingUp", err)
	}
	// An hour of retries.
	for range 720 {
		wctx, wcancel := context.WithTimeout(ctx, testTimeout)
		err := e.clock.BlockUntilContext(wctx, 1)
		wcancel()
		if err != nil {
			t.Fatalf("the Materializer stopped retrying: %v", err)
		}
		e.clock.Advance(5 * time.Second)
	}
	if err := e.m.Ready(); err == nil || !strings.Contains(err.Error(), "topic "+topicProgress) {
		t.Fatalf("after an hour, Ready: %v, want it to name topic %s", err, topicProgress)
	}
	if got := logs.naming(slog.LevelWarn, topicProgress); len(got) != 1 {
		t.Fatalf("warnings naming the topic after an hour of retries: %d, want 1:\n%s", len(got), strings.Join(got, "\n"))
	}

	// The last Advance woke a retry: wait until it sleeps again, or the
	// next Advance fires nothing and the retry waits for good.
	wctx, wcancel := context.WithTimeout(ctx, testTimeout)
	err = e.clock.BlockUntilContext(wctx, 1)
	wcancel()
	if err != nil {
		t.Fatalf("the Materializer stopped retrying: %v", err)
	}
	e.src.CreateTopic(topicProgress, "id-progress", 3)
	e.clock.Advance(5 * time.Second)
	e.waitFor("the store to catch up", func() bool { return e.m.Ready() == nil })
	if got := logs.naming(slog.LevelInfo, topicProgress); len(got) != 2 || !strings.HasPrefix(got[1], "INFO") {
		t.Fatalf("lines naming the topic: %q, want the warning and then an info line", got)
	}
}
