package deadletter

import (
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/router/port"
)

// HeaderReplayedFrom marks a record put back by Replay with where it was in
// the dead-letter topic: "<topic>/<partition>/<offset>". The router serves a
// replayed request whose intent was rejected (see port.HeaderReplayedFrom).
const HeaderReplayedFrom = port.HeaderReplayedFrom

// Letter is one record of the dead-letter topic, with its dead-letter
// headers decoded. OriginalPartition and OriginalOffset are -1 when the
// record does not say (it was not written by the router).
type Letter struct {
	Topic     string // the dead-letter topic
	Partition int32
	Offset    int64
	Timestamp time.Time

	OriginalTopic     string
	OriginalPartition int32
	OriginalOffset    int64
	Class             string // the error class, e.g. invalid_json, unroutable
	Message           string // why, in words

	Key, Value []byte
	Headers    []port.Header // every header, the dead-letter ones included
}

// FromRecord decodes a record of the dead-letter topic.
func FromRecord(rec *port.Record) *Letter {
	l := &Letter{
		Topic:             rec.Topic,
		Partition:         rec.Partition,
		Offset:            rec.Offset,
		Timestamp:         time.UnixMilli(rec.TimestampMs).UTC(),
		OriginalPartition: -1,
		OriginalOffset:    -1,
		Key:               rec.Key,
		Value:             rec.Value,
		Headers:           rec.Headers,
	}
	// The router appends its headers after the record's own, so the last
	// of each wins: a record dead-lettered twice tells its latest story.
	for _, h := range rec.Headers {
		v := string(h.Value)
		switch h.Key {
		case port.HeaderOriginalTopic:
			l.OriginalTopic = v
		case port.HeaderOriginalPartition:
			if n, err := strconv.ParseInt(v, 10, 32); err == nil {
				l.OriginalPartition = int32(n)
			}
		case port.HeaderOriginalOffset:
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				l.OriginalOffset = n
			}
		case port.HeaderErrorClass:
			l.Class = v
		case port.HeaderErrorMessage:
			l.Message = v
		}
	}
	return l
}

// Position is where a letter is in the dead-letter topic.
func (l *Letter) Position() Position { return Position{Partition: l.Partition, Offset: l.Offset} }

// ReplayHeaders returns the headers a replayed copy of l carries: l's own,
// without the dead-letter headers (switchboard.original.*,
// switchboard.error.*) and without an earlier HeaderReplayedFrom, plus
// HeaderReplayedFrom naming l.
func (l *Letter) ReplayHeaders() []port.Header {
	out := make([]port.Header, 0, len(l.Headers)+1)
	for _, h := range l.Headers {
		if isDeadLetterHeader(h.Key) || h.Key == HeaderReplayedFrom {
			continue
		}
		out = append(out, h)
	}
	from := l.Topic + "/" + strconv.FormatInt(int64(l.Partition), 10) + "/" + strconv.FormatInt(l.Offset, 10)
	return append(out, port.Header{Key: HeaderReplayedFrom, Value: []byte(from)})
}

// deadLetterPrefixes are the namespaces of the headers the router adds when
// it dead-letters a record.
var deadLetterPrefixes = []string{
	prefixOf(port.HeaderOriginalTopic),
	prefixOf(port.HeaderErrorClass),
}

func prefixOf(h string) string { return h[:strings.LastIndexByte(h, '.')+1] }

func isDeadLetterHeader(key string) bool {
	for _, p := range deadLetterPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}
