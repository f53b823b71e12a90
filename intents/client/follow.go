package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// followGrace is how long Follow waits, after the result, for progress the
// result counts (progress_count) but that it has not read yet: the two
// topics are read as their fetches return.
const followGrace = time.Second

// Follow is Await that also reports the intent's progress: it reads the
// results and the progress topics from their current ends, calls publish
// once it is reading, calls onProgress with each progress record of
// (tenant, intentID) in sequence order (each once), and returns the result after the
// progress it counts (progress_count), or after followGrace if some of that
// progress cannot be read. onProgress runs on Follow's goroutine.
func Follow(ctx context.Context, s kafkaio.Settings, codec *schemas.Codec, resultsTopic, progressTopic, tenant, intentID string,
	publish func() error, onProgress func(*schemas.IntentProgress),
) (*schemas.IntentResult, error) {
	var (
		res    *schemas.IntentResult
		pubErr error
		last   int64
		found  = errors.New("found")
	)
	tailCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := func() bool { return res != nil && (res.ProgressCount == nil || last >= *res.ProgressCount) }
	ready := func(kafkaio.Offsets) {
		if pubErr = publish(); pubErr != nil {
			cancel()
		}
	}
	err := kafkaio.Read(tailCtx, s, kafkaio.Reading{Topics: []string{resultsTopic, progressTopic}, OnStart: ready}, func(rec *port.Record) error {
		if string(rec.Key) != intentID {
			return nil
		}
		if rec.Topic == progressTopic {
			var p schemas.IntentProgress
			if codec.Decode(rec.Value, &p) != nil || p.IntentID != intentID || intents.TenantOf(p.Tenant) != tenant || p.Sequence <= last {
				return nil
			}
			last = p.Sequence
			onProgress(&p)
		} else if res == nil {
			var r schemas.IntentResult
			if err := codec.Decode(rec.Value, &r); err != nil {
				return fmt.Errorf("%w: %w", ErrUndecodableResult, err)
			}
			if r.IntentID != intentID || intents.TenantOf(r.Tenant) != tenant {
				return nil
			}
			res = &r
			if !done() {
				time.AfterFunc(followGrace, cancel) // the rest of its progress, or not
			}
		}
		if done() {
			return found
		}
		return nil
	})
	switch {
	case pubErr != nil:
		return nil, pubErr
	case res != nil:
		return res, nil
	case err != nil && !errors.Is(err, found):
		return nil, err
	}
	return nil, ErrNoResult
}
