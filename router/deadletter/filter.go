package deadletter

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/router/kafkaio"
)

// Position is a record's place in the dead-letter topic.
type Position struct {
	Partition int32
	Offset    int64
}

func (p Position) String() string { return fmt.Sprintf("%d:%d", p.Partition, p.Offset) }

// Filter selects letters. Its zero value selects every letter; each set
// field narrows the selection (they combine with AND).
type Filter struct {
	Class string // the error class, exactly
	Topic string // the original topic, exactly

	Since, Until time.Time // dead-lettered at or after Since, before Until

	// Partition, when not nil, is the one dead-letter partition to read.
	Partition *int32
	// FromOffset and ToOffset bound the offsets read, inclusive; -1 is
	// unbounded. With several partitions they apply to each.
	FromOffset, ToOffset int64

	// Positions, when not empty, are the only letters selected.
	Positions []Position
}

// NewFilter returns a Filter that selects everything.
func NewFilter() Filter { return Filter{FromOffset: -1, ToOffset: -1} }

// Match reports whether f selects l.
func (f *Filter) Match(l *Letter) bool {
	switch {
	case f.Class != "" && l.Class != f.Class,
		f.Topic != "" && l.OriginalTopic != f.Topic,
		!f.Since.IsZero() && l.Timestamp.Before(f.Since),
		!f.Until.IsZero() && !l.Timestamp.Before(f.Until),
		f.Partition != nil && l.Partition != *f.Partition,
		f.FromOffset >= 0 && l.Offset < f.FromOffset,
		f.ToOffset >= 0 && l.Offset > f.ToOffset:
		return false
	}
	if len(f.Positions) == 0 {
		return true
	}
	for _, p := range f.Positions {
		if p == l.Position() {
			return true
		}
	}
	return false
}

// Start says where a scan of the dead-letter topic begins in a partition
// (see kafkaio.FromExtent), so that partitions and offsets the filter excludes are
// not read at all.
func (f *Filter) Start(e kafkaio.Extent) (int64, bool) {
	if f.Partition != nil && e.Partition != *f.Partition {
		return 0, false
	}
	from := max(f.FromOffset, e.Low)
	if len(f.Positions) > 0 {
		first := int64(-1)
		for _, p := range f.Positions {
			if p.Partition == e.Partition && (first < 0 || p.Offset < first) {
				first = p.Offset
			}
		}
		if first < 0 {
			return 0, false
		}
		from = max(from, first)
	}
	if f.ToOffset >= 0 && from > f.ToOffset {
		return 0, false
	}
	return from, true
}

// Selective reports whether f narrows the selection at all.
func (f *Filter) Selective() bool {
	return f.Class != "" || f.Topic != "" || !f.Since.IsZero() || !f.Until.IsZero() ||
		f.Partition != nil || f.FromOffset >= 0 || f.ToOffset >= 0 || len(f.Positions) > 0
}

// ParsePositions reads "p:o,p:o,...", e.g. "0:12,3:40".
func ParsePositions(s string) ([]Position, error) {
	var out []Position
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		ps, offs, ok := strings.Cut(item, ":")
		p, perr := strconv.ParseInt(ps, 10, 32)
		o, oerr := strconv.ParseInt(offs, 10, 64)
		if !ok || perr != nil || oerr != nil || p < 0 || o < 0 {
			return nil, fmt.Errorf("%q is not partition:offset, such as 0:12", item)
		}
		out = append(out, Position{Partition: int32(p), Offset: o})
	}
	if len(out) == 0 {
		return nil, errors.New("no partition:offset given, such as 0:12,3:40")
	}
	return out, nil
}

// ParseOffsetRange reads an inclusive offset range: "A-B", "A-" (from A),
// "-B" (up to B) or "A" (just A). Unbounded ends are -1.
func ParseOffsetRange(s string) (from, to int64, err error) {
	bad := fmt.Errorf("%q is not an offset range such as 120-130, 120-, -130 or 120", s)
	a, b, isRange := strings.Cut(strings.TrimSpace(s), "-")
	parse := func(v string) (int64, error) {
		if v == "" {
			return -1, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, bad
		}
		return n, nil
	}
	if from, err = parse(a); err != nil {
		return 0, 0, err
	}
	if !isRange {
		if from < 0 {
			return 0, 0, bad
		}
		return from, from, nil
	}
	if to, err = parse(b); err != nil {
		return 0, 0, err
	}
	if (from < 0 && to < 0) || (to >= 0 && from > to) {
		return 0, 0, bad
	}
	return from, to, nil
}

// ParseTime reads a point in time: RFC 3339 ("2026-12-02T10:00:00Z"), a
// date ("2026-12-02", midnight UTC), or a Go duration ("90m", "2h") meaning
// that long before now.
func ParseTime(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q: a duration means that long ago and must not be negative", s)
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is neither a time (2026-12-02T10:00:00Z, 2026-12-02) nor a duration ago (90m, 2h)", s)
}
