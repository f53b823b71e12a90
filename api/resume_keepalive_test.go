package api_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/apitest"
)

// scanHistory is an apitest.Log whose Replay, after the log's records, runs
// more (a long scan of the topics) as more decides.
type scanHistory struct {
	*apitest.Log
	more func(ctx context.Context, fn func(api.Record) error) error
}

func (s *scanHistory) Replay(ctx context.Context, from, to api.Position, fn func(api.Record) error) error {
	if err := s.Log.Replay(ctx, from, to, fn); err != nil {
		return err
	}
	return s.more(ctx, fn)
}

func scanHarness(t *testing.T) (*harness, *scanHistory) {
	t.Helper()
	hist := &scanHistory{Log: apitest.NewLog(1)}
	h := newHarness(t, withOption(api.WithHistory(hist)), withConfig(func(c *api.Config) {
		c.PingPeriod = 2 * time.Second
		c.PongWait = 3 * time.Second
	}))
	hist.Attach(h.results, true)
	return h, hist
}

// otherRecord is a record of the results topic no test subscription matches.
func otherRecord(off int64) api.Record {
	return api.Record{Stream: api.StreamResults, Offset: off, Result: result("other", "echo", "nobody")}
}

// TestStreamLongReplayKeepsItsConnection: a replay that scans many records
// matching nothing, for longer than PongWait, keeps its connection (the
// reader reads no pongs while it replays).
func TestStreamLongReplayKeepsItsConnection(t *testing.T) {
	h, hist := scanHarness(t)
	hist.more = func(_ context.Context, fn func(api.Record) error) error {
		for i := range 10 {
			if err := fn(otherRecord(int64(i))); err != nil {
				return err
			}
			// A write (a ping the last check asked for) takes microseconds;
			// the fake clock must not run seconds ahead while one is in
			// flight, or the check finds it stalled past WriteWait: seen
			// under -race, 5 runs in 30.
			if err := writesSettle(h.srv); err != nil {
				return err
			}
			h.clock.Advance(time.Second)
			api.CheckConns(h.srv)
		}
		return nil
	}
	c := h.dial(nil)
	c.sendText(resumeMsg(h.results.Position().String(), `{"session_id":"s"}`))
	c.expect("resumed")
	hist.AppendResult(sessionResult(1, "s"))
	if m := c.expect("result"); m.Result.IntentID != sessionResult(1, "s").IntentID {
		t.Fatalf("got %+v", m.Result)
	}
}

// writesSettle waits until no stream connection's writer is in a write
// (it runs on the server's goroutine: an error, not t.Fatal).
func writesSettle(srv *api.Server) error {
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	poll := time.NewTicker(100 * time.Microsecond)
	defer poll.Stop()
	for api.WriteInProgress(srv) {
		select {
		case <-deadline.C:
			return errors.New("a write never finished")
		case <-poll.C:
		}
	}
	return nil
}

// TestStreamReplayEndsWithItsConnection: a replay whose client has gone
// stops reading history once the keepalive drops the connection.
func TestStreamReplayEndsWithItsConnection(t *testing.T) {
	h, hist := scanHarness(t)
	started, ended := make(chan struct{}), make(chan error, 1)
	hist.more = func(ctx context.Context, _ func(api.Record) error) error {
		close(started)
		select {
		case <-ctx.Done():
			ended <- ctx.Err()
		case <-time.After(testTimeout):
			ended <- errors.New("the replay was never cancelled")
		}
		return ctx.Err()
	}
	c := h.dial(nil)
	c.sendText(resumeMsg(h.results.Position().String(), `{"session_id":"s"}`))
	select {
	case <-started:
	case <-time.After(testTimeout):
		t.Fatal("the replay never started")
	}
	_ = c.conn.Close()
	h.clock.Advance(4 * time.Second) // past PongWait: nothing was seen
	api.CheckConns(h.srv)
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("replay: %v, want it cancelled", err)
	}
}
