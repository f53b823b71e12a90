package deadletter

import (
	"context"
	"errors"

	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
)

// Progress is how far a Read has come: records read so far (selected or
// not) out of those the topic held where the read began.
type Progress struct {
	Read, Total int64
}

// Read reads the dead-letter topic once, to its end (kafkaio.Read FromExtent ToEnd), and calls
// fn for every letter f selects, at most limit of them (limit < 1: all).
// Partitions and offsets f excludes are not read. progress, if not nil, is
// called after every record read. Read returns fn's error, a Kafka or ctx
// error, or nil.
func Read(ctx context.Context, s kafkaio.Settings, topic string, f Filter, limit int, progress func(Progress), fn func(*Letter) error) error {
	var (
		p       Progress
		matched int
		enough  = errors.New("enough")
	)
	err := kafkaio.Read(ctx, s, kafkaio.Reading{Topics: []string{topic}, To: kafkaio.ToEnd(), From: kafkaio.FromExtent(func(e kafkaio.Extent) (int64, bool) {
		from, ok := f.Start(e)
		if ok && from < e.High {
			end := e.High
			if f.ToOffset >= 0 {
				end = min(end, f.ToOffset+1)
			}
			p.Total += max(end-max(from, e.Low), 0)
		}
		return from, ok
	})}, func(rec *port.Record) error {
		p.Read++
		if progress != nil {
			progress(p)
		}
		l := FromRecord(rec)
		if !f.Match(l) {
			return nil
		}
		if err := fn(l); err != nil {
			return err
		}
		matched++
		if limit > 0 && matched >= limit {
			return enough
		}
		return nil
	})
	if errors.Is(err, enough) {
		return nil
	}
	return err
}
