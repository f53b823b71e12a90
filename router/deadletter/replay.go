package deadletter

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/router/port"
)

// Sender publishes one record and returns once the broker acknowledged it;
// *kafkaio.Producer is one.
type Sender interface {
	Send(ctx context.Context, topic string, key, value []byte, headers []port.Header, ts time.Time) error
}

// Replayed is what became of one letter given to Replay.
type Replayed struct {
	Letter *Letter
	Topic  string // where it was sent ("" if it had nowhere to go)
	Err    error  // nil once the broker acknowledged it
}

// Target returns the topic a letter is replayed to: to when not empty, else
// its original topic; an error if there is none or it is the dead-letter
// topic itself (a replay must not feed the dead-letter topic to itself).
func Target(l *Letter, to string) (string, error) {
	t := to
	if t == "" {
		t = l.OriginalTopic
	}
	switch t {
	case "":
		return "", fmt.Errorf("dead letter %s does not name its original topic: give a topic to replay it to", l.Position())
	case l.Topic:
		return "", fmt.Errorf("dead letter %s: will not replay into the dead-letter topic %s itself", l.Position(), t)
	}
	return t, nil
}

// Replay sends every letter to its Target with its key, value and
// ReplayHeaders, parallel at a time (at least 1), and waits for every
// delivery. The copies get a new timestamp (the time they are sent), so a
// replayed intent request gets a deadline from now, not from when it first
// failed. Partitions are chosen by the producer from the key, as for any
// intent-keyed record. The results are in the order of letters.
//
// Replay is not idempotent: replaying a letter twice writes it twice. The
// router's dedup window drops a second copy of an intent request whose
// intent it has resolved; other consumers see both.
func Replay(ctx context.Context, s Sender, letters []*Letter, to string, parallel int) []Replayed {
	out := make([]Replayed, len(letters))
	sem := make(chan struct{}, max(parallel, 1))
	var wg sync.WaitGroup
	for i, l := range letters {
		out[i].Letter = l
		topic, err := Target(l, to)
		if err != nil {
			out[i].Err = err
			continue
		}
		out[i].Topic = topic
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			out[i].Err = ctx.Err()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i].Err = s.Send(ctx, topic, l.Key, l.Value, l.ReplayHeaders(), time.Time{})
		}()
	}
	wg.Wait()
	return out
}
