package apitest

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/schemas"
)

var _ api.History = (*Log)(nil)

// Log is an in-memory stand-in for the results, timeouts and progress
// topics: records appended to it are fed to the attached [api.Results] (as
// the reader of the topics would, through an [api.Feed]), and it serves as
// the [api.History] a resume replays from. It is safe for concurrent use.
type Log struct {
	partitions int

	mu       sync.Mutex
	records  [streams][][]api.Record // by stream, by partition
	earliest [streams][]int64        // by stream, by partition: first offset held
	feeds    []*Feed
}

// streams is the number of topics a Log holds: results, timeouts, progress.
const streams = 3

// Feed feeds one Results from a Log.
type Feed struct {
	log     *Log
	results *api.Results
	order   *api.Feed // puts each intent's progress before its result
	auto    bool
	mu      sync.Mutex       // serialises deliveries, so each partition goes in order
	next    [streams][]int64 // by stream, by partition: next offset to deliver
}

// NewLog returns an empty log of results, timeouts and progress topics with
// the given number of partitions each.
func NewLog(partitions int) *Log {
	l := &Log{partitions: partitions}
	for k := range streams {
		l.records[k] = make([][]api.Record, partitions)
		l.earliest[k] = make([]int64, partitions)
	}
	return l
}

// Attach starts feeding r from the log's current end (calling r.Begin). An
// auto feed gets each record as it is appended; a manual one when its
// CatchUp is called. A manual feed hands over each partition's results, then
// its timeouts, then its progress, so a result can come before its
// progress: the api.Feed in between holds it until its progress has come.
func (l *Log) Attach(r *api.Results, auto bool) *Feed {
	l.mu.Lock()
	defer l.mu.Unlock()
	order, _ := api.NewFeed(r, api.FeedConfig{}) // fails only registering metrics, and there is no registerer
	f := &Feed{log: l, results: r, order: order, auto: auto}
	pos := api.Position{Results: make([]int64, l.partitions), Timeouts: make([]int64, l.partitions), Progress: make([]int64, l.partitions)}
	for k := range streams {
		f.next[k] = make([]int64, l.partitions)
		for p := range l.partitions {
			f.next[k][p] = int64(len(l.records[k][p]))
		}
	}
	copy(pos.Results, f.next[0])
	copy(pos.Timeouts, f.next[1])
	copy(pos.Progress, f.next[2])
	order.Begin(pos)
	l.feeds = append(l.feeds, f)
	return f
}

// PartitionOf returns the partition an intent id is written to.
func (l *Log) PartitionOf(intentID string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(intentID))
	return int32(h.Sum32() % uint32(l.partitions))
}

// AppendResult appends a result to the partition of its intent id and feeds
// the auto feeds.
func (l *Log) AppendResult(res *schemas.IntentResult) {
	l.append(api.Record{Stream: api.StreamResults, Partition: l.PartitionOf(res.IntentID), Result: res})
}

// AppendTimeout appends a timeout event to the partition of its intent id
// and feeds the auto feeds.
func (l *Log) AppendTimeout(t *schemas.IntentTimeout) {
	l.append(api.Record{Stream: api.StreamTimeouts, Partition: l.PartitionOf(t.IntentID), Timeout: t})
}

// AppendProgress appends a progress record to the partition of its intent id
// and feeds the auto feeds.
func (l *Log) AppendProgress(p *schemas.IntentProgress) {
	l.append(api.Record{Stream: api.StreamProgress, Partition: l.PartitionOf(p.IntentID), Progress: p})
}

func (l *Log) append(rec api.Record) {
	l.mu.Lock()
	part := &l.records[rec.Stream][rec.Partition]
	rec.Offset = int64(len(*part))
	*part = append(*part, rec)
	feeds := slices.Clone(l.feeds)
	l.mu.Unlock()
	for _, f := range feeds {
		if f.auto {
			f.CatchUp()
		}
	}
}

// CatchUp feeds every record appended since the last delivery.
func (f *Feed) CatchUp() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		f.log.mu.Lock()
		var (
			rec api.Record
			ok  bool
		)
		for k := 0; k < streams && !ok; k++ {
			for p := 0; p < f.log.partitions && !ok; p++ {
				if n := f.next[k][p]; n < int64(len(f.log.records[k][p])) {
					rec, ok = f.log.records[k][p][n], true
					f.next[k][p] = n + 1
				}
			}
		}
		f.log.mu.Unlock()
		if !ok {
			return
		}
		switch rec.Stream {
		case api.StreamResults:
			f.order.Result(rec.Partition, rec.Offset, rec.Result)
		case api.StreamTimeouts:
			f.order.Timeout(rec.Partition, rec.Offset, rec.Timeout)
		default:
			f.order.Progress(rec.Partition, rec.Offset, rec.Progress)
		}
	}
}

// DeleteBefore drops the records of every partition before the given
// position, as retention would.
func (l *Log) DeleteBefore(pos api.Position) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, offs := range [][]int64{pos.Results, pos.Timeouts, pos.Progress} {
		for p, off := range offs {
			l.earliest[k][p] = max(l.earliest[k][p], off)
		}
	}
}

// Earliest implements api.History.
func (l *Log) Earliest(context.Context) (api.Position, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return api.Position{Results: slices.Clone(l.earliest[0]), Timeouts: slices.Clone(l.earliest[1]), Progress: slices.Clone(l.earliest[2])}, nil
}

// Replay implements api.History. It replays the progress topic first, then
// the timeouts topic, then the results topic (Kafka gives no order across
// topics; this is the order the router writes in).
func (l *Log) Replay(ctx context.Context, from, to api.Position, fn func(api.Record) error) error {
	for k := streams - 1; k >= 0; k-- {
		offs, ends := from.Results, to.Results
		switch k {
		case 1:
			offs, ends = from.Timeouts, to.Timeouts
		case 2:
			offs, ends = from.Progress, to.Progress
		}
		for p, start := range offs {
			l.mu.Lock()
			if start < ends[p] && start < l.earliest[k][p] {
				l.mu.Unlock()
				return api.ErrCursorExpired
			}
			if ends[p] > int64(len(l.records[k][p])) {
				l.mu.Unlock()
				return fmt.Errorf("apitest: replay to %d past the end %d", ends[p], len(l.records[k][p]))
			}
			var recs []api.Record
			if start < ends[p] {
				recs = slices.Clone(l.records[k][p][start:ends[p]])
			}
			l.mu.Unlock()
			for _, rec := range recs {
				if err := ctx.Err(); err != nil {
					return err
				}
				if err := fn(rec); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
