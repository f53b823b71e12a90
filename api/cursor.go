package api

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Stream names the topic a streamed record came from.
type Stream uint8

// The topics the stream reads.
const (
	StreamResults  Stream = iota // the results topic (IntentResult)
	StreamTimeouts               // the timeouts topic (IntentTimeout)
	StreamProgress               // the progress topic (IntentProgress)
)

// streams lists the streams in cursor order.
var streams = [...]Stream{StreamResults, StreamTimeouts, StreamProgress}

// prefix is the stream's letter in a cursor.
func (k Stream) prefix() byte {
	switch k {
	case StreamTimeouts:
		return 't'
	case StreamProgress:
		return 'p'
	}
	return 'r'
}

// Position is a complete position in the topics the stream reads: for each
// partition of the results, the timeouts and the progress topic, the offset
// of the next record to read (the last record read plus one, as Kafka
// commits). Partitions are numbered from 0: Results[p] is partition p.
//
// Its text form is the stream's resume cursor: comma-separated
// <r|t|p><partition>:<next offset>, results first, then timeouts, then
// progress, e.g.
//
//	r0:1234,r1:88,r2:0,t0:17,t1:3,t2:0,p0:5120,p1:0,p2:77
//
// A cursor without progress parts (written before the progress stream
// existed) still parses, with Progress empty. Clients treat a cursor as
// opaque: they keep the last one they received and send it back in a
// resume message.
type Position struct {
	Results  []int64
	Timeouts []int64
	Progress []int64
}

// at returns the next offset of a partition, or -1 if the position does not
// hold it.
func (p Position) at(k Stream, partition int32) int64 {
	offs := p.of(k)
	if partition < 0 || int(partition) >= len(offs) {
		return -1
	}
	return offs[partition]
}

func (p Position) of(k Stream) []int64 {
	switch k {
	case StreamTimeouts:
		return p.Timeouts
	case StreamProgress:
		return p.Progress
	}
	return p.Results
}

// Clone returns a deep copy of p.
func (p Position) Clone() Position {
	return Position{
		Results:  append([]int64(nil), p.Results...),
		Timeouts: append([]int64(nil), p.Timeouts...),
		Progress: append([]int64(nil), p.Progress...),
	}
}

// String returns the cursor of p ("" for the zero Position).
func (p Position) String() string {
	var b strings.Builder
	b.Grow(10 * (len(p.Results) + len(p.Timeouts) + len(p.Progress)))
	for _, k := range streams {
		for i, off := range p.of(k) {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteByte(k.prefix())
			b.WriteString(strconv.Itoa(i))
			b.WriteByte(':')
			b.WriteString(strconv.FormatInt(off, 10))
		}
	}
	return b.String()
}

// errBadCursor is wrapped by ParseCursor's errors.
var errBadCursor = errors.New("bad cursor")

// ParseCursor parses a cursor written by [Position.String]. Every partition
// from 0 up to the highest one named must be present, once.
func ParseCursor(s string) (Position, error) {
	var p Position
	if s == "" {
		return p, fmt.Errorf("%w: empty", errBadCursor)
	}
	// Every partition up to the highest named is present, so none is past
	// the number of parts: a bound checked before any slice grows.
	parts := int64(strings.Count(s, ",") + 1)
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		if len(part) < 4 || (part[0] != 'r' && part[0] != 't' && part[0] != 'p') {
			return Position{}, fmt.Errorf("%w: %q is not <r|t|p><partition>:<offset>", errBadCursor, part)
		}
		ps, os, ok := strings.Cut(part[1:], ":")
		partition, perr := strconv.ParseInt(ps, 10, 32)
		off, oerr := strconv.ParseInt(os, 10, 64)
		if !ok || perr != nil || oerr != nil || partition < 0 || partition > 1<<16 || off < 0 {
			return Position{}, fmt.Errorf("%w: %q is not <r|t|p><partition>:<offset>", errBadCursor, part)
		}
		if partition >= parts {
			return Position{}, fmt.Errorf("%w: %q names partition %d, but the cursor has %d parts (every partition from 0 on must be present)", errBadCursor, part, partition, parts)
		}
		key := part[:1] + ps
		if seen[key] {
			return Position{}, fmt.Errorf("%w: %s appears twice", errBadCursor, key)
		}
		seen[key] = true
		offs := &p.Results
		switch part[0] {
		case 't':
			offs = &p.Timeouts
		case 'p':
			offs = &p.Progress
		}
		for int64(len(*offs)) <= partition {
			*offs = append(*offs, -1)
		}
		(*offs)[partition] = off
	}
	for _, k := range streams {
		for i, off := range p.of(k) {
			if off < 0 {
				return Position{}, fmt.Errorf("%w: partition %c%d is missing", errBadCursor, k.prefix(), i)
			}
		}
	}
	return p, nil
}

// sameShape reports whether p and q name the same partitions.
func (p Position) sameShape(q Position) bool {
	return len(p.Results) == len(q.Results) && len(p.Timeouts) == len(q.Timeouts) && len(p.Progress) == len(q.Progress)
}

// behind reports whether p is before q on some partition (both of the same
// shape).
func (p Position) behind(q Position) bool {
	for _, k := range streams {
		qo := q.of(k)
		for i, off := range p.of(k) {
			if off < qo[i] {
				return true
			}
		}
	}
	return false
}

// max returns, per partition, the later of p and q (both of the same shape).
func (p Position) max(q Position) Position {
	out := p.Clone()
	for _, k := range streams {
		o, qo := out.of(k), q.of(k)
		for i := range o {
			o[i] = max(o[i], qo[i])
		}
	}
	return out
}
