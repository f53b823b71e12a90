package kafkaio

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/port"
)

// Offsets are per-partition offsets of some topics: Offsets[topic][p] is
// partition p's.
type Offsets map[string][]int64

// Extent is what one partition of a topic held when a Read began: offsets
// from Low (the first still kept) up to High (one past the last committed
// one: the last stable offset).
type Extent struct {
	Topic     string
	Partition int32
	Low, High int64
}

// Reading says what Read reads: which topics, where each partition starts
// (From), where reading stops (To), and whom to tell when it has started and
// when it has caught up. The zero From and To read from the end, forever.
type Reading struct {
	Topics []string
	From   From
	To     To
	// Group, if set, makes Read join this consumer group instead of
	// assigning every partition itself: the group shares the partitions,
	// a new group starts at the beginning of the topics (From must be
	// FromBeginning), offsets are committed automatically as records are
	// handed to fn (so a member killed with records in hand loses them:
	// what bench's in-process agent needs, not what the router's Source or
	// the Go agent runner's GroupReader need), and To must be Forever.
	// OnStart and OnCaughtUp are not called.
	Group string
	// OnStart, if not nil, is called once the start offsets are fixed and
	// before the first record is handed to fn: every record from them on is
	// read (a record produced after OnStart returns is seen). Offsets the
	// broker was left to resolve (FromBeginning, FromTime past the last
	// record) are librdkafka's logical offsets (kafka.OffsetBeginning,
	// kafka.OffsetEnd).
	OnStart func(start Offsets)
	// OnCaughtUp, if not nil, is called once, when every partition has been
	// read up to where it ended when reading began (the consumer's
	// end-of-partition event, which for read_committed is the last stable
	// offset): what readers that rebuild state from the past need.
	OnCaughtUp func()
	// OnEOF, if not nil, is called every time a partition has been read to
	// its end (as read_committed sees it); its error ends Read.
	OnEOF func(topic string, partition int32) error
	// OnIdle, if not nil, is called whenever no record came for 20 ms; its
	// error ends Read.
	OnIdle func() error
	// PrefetchBytes, when positive, bounds what librdkafka prefetches
	// (queued.max.messages.kbytes and fetch.max.bytes, unless
	// kafka.properties sets them); 0: librdkafka's defaults (64 MiB queued).
	PrefetchBytes int64
}

// From is where Read starts in each partition.
type From struct {
	kind    fromKind
	at      time.Time
	offsets Offsets
	choose  func(Extent) (int64, bool)
}

type fromKind int

const (
	fromEnd fromKind = iota
	fromBeginning
	fromTime
	fromOffsets
	fromOffsetsOrEarliest
	fromExtent
)

// FromEnd starts at each partition's end (its last stable offset): records of
// a transaction open when Read starts are read once it commits. It is the
// zero From.
func FromEnd() From { return From{} }

// FromBeginning starts at the first record each partition still holds.
func FromBeginning() From { return From{kind: fromBeginning} }

// FromTime starts at the first record stamped at or after t (the end, where
// there is none); the zero t is FromBeginning.
func FromTime(t time.Time) From {
	if t.IsZero() {
		return FromBeginning()
	}
	return From{kind: fromTime, at: t}
}

// FromOffsets starts each partition of each topic in o at its offset in o;
// partitions not in o are not read, and the topics are those of o (Reading's
// Topics is not needed). A start offset the broker no longer holds ends Read
// with ErrOffsetOutOfRange.
func FromOffsets(o Offsets) From { return From{kind: fromOffsets, offsets: o} }

// FromOffsetsOrEarliest is FromOffsets, except that a negative offset, or
// one the broker no longer holds, starts at the partition's first offset.
func FromOffsetsOrEarliest(o Offsets) From { return From{kind: fromOffsetsOrEarliest, offsets: o} }

// FromExtent asks choose, for every partition, where to begin in it, given
// its extent: an offset (one below Low begins at Low) or to skip it (false).
func FromExtent(choose func(Extent) (int64, bool)) From {
	return From{kind: fromExtent, choose: choose}
}

// To is where Read stops.
type To struct {
	kind    toKind
	offsets Offsets
}

type toKind int

const (
	toForever toKind = iota
	toEnd
	toOffsets
)

// Forever reads until ctx ends or fn fails; Read then returns nil (or fn's
// error). It is the zero To. A topic that does not exist yet, or whose
// partitions have no leader yet, is waited for.
func Forever() To { return To{} }

// ToEnd reads each partition up to the end it had when Read began (a record
// written after that is not read) and returns nil once every partition was
// read that far. A topic that does not exist is an error.
func ToEnd() To { return To{kind: toEnd} }

// ToOffsets reads each partition up to its offset in o (exclusive) and
// returns nil once every partition was read that far: when it has handed
// over the record before it, reached it, or reached the partition's end.
// Partitions not in o are not read.
func ToOffsets(o Offsets) To { return To{kind: toOffsets, offsets: o} }

// Read reads r.Topics as r says and calls fn with each committed record, in
// order within a partition, until ctx ends, fn returns an error (which Read
// returns), the client is refused (a *RefusedError) or hits a fatal error, or,
// when r.To is bounded, every partition has been read to its end. A bounded
// Read that ctx ends first returns the ctx error, wrapped; a Forever one
// returns nil. Outside a Group, Read joins no consumer group: every reader
// sees every record, and nothing is committed.
func Read(ctx context.Context, s Settings, r Reading, fn func(*port.Record) error) error {
	if r.Group != "" {
		return r.consume(ctx, s, fn)
	}
	byOffsets := r.From.kind == fromOffsets || r.From.kind == fromOffsetsOrEarliest
	if byOffsets {
		r.Topics = r.Topics[:0:0]
		for topic := range r.From.offsets {
			r.Topics = append(r.Topics, topic)
		}
		if r.To.kind == toOffsets && !anyBelow(r.From.offsets, r.To.offsets) {
			return nil // nothing to read; no client needed
		}
	}
	bounded := r.To.kind != toForever
	c, err := newReader(s, "read", bounded || r.OnCaughtUp != nil || r.OnEOF != nil, r.readerSettings(s))
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }() // nothing to commit

	p, err := r.plan(ctx, c)
	if err != nil {
		return err
	}
	if len(p.assign) > 0 {
		if err := c.Assign(p.assign); err != nil {
			return fmt.Errorf("kafkaio: assigning %v: %w", r.Topics, err)
		}
	}
	if r.OnStart != nil {
		r.OnStart(p.start)
	}
	if bounded && len(p.assign) == 0 {
		return nil
	}
	return r.loop(ctx, c, p, fn)
}

// readerSettings are the settings of Read's consumer besides newReader's:
// where a partition without a valid start offset begins, and the prefetch
// bound.
func (r Reading) readerSettings(s Settings) kafka.ConfigMap {
	extra := kafka.ConfigMap{}
	switch r.From.kind {
	case fromOffsets:
		extra["auto.offset.reset"] = "error"
	case fromOffsetsOrEarliest:
		extra["auto.offset.reset"] = "earliest"
	}
	if r.PrefetchBytes > 0 {
		withPrefetch(s, extra, r.PrefetchBytes)
	}
	return extra
}

// consume is Read in a Group.
func (r Reading) consume(ctx context.Context, s Settings, fn func(*port.Record) error) error {
	if r.From.kind != fromBeginning || r.To.kind != toForever {
		return fmt.Errorf("%w: group %s reads from the beginning, forever", ErrReading, r.Group)
	}
	c, err := newConsumer(s, "consumer", kafka.ConfigMap{
		"group.id":             r.Group,
		"auto.offset.reset":    "earliest",
		"enable.auto.commit":   true,
		"isolation.level":      "read_committed",
		"enable.partition.eof": false,
	})
	if err != nil {
		return err
	}
	c.group = r.Group
	defer func() { _ = c.Close() }() // a consumer that read nothing to commit closes without news
	if err := c.SubscribeTopics(r.Topics, nil); err != nil {
		return fmt.Errorf("kafkaio: subscribing to %v: %w", r.Topics, err)
	}
	return r.loop(ctx, c, plan{}, fn)
}

// anyBelow reports whether some partition in from starts below its end in to.
func anyBelow(from, to Offsets) bool {
	for topic, offs := range from {
		for p, off := range offs {
			if p < len(to[topic]) && off < to[topic][p] {
				return true
			}
		}
	}
	return false
}

type topicPart struct {
	topic string
	p     int32
}

// plan is where a Read starts and ends: the partitions to assign with their
// start offsets, and, for a bounded Read, the end of each.
type plan struct {
	assign []kafka.TopicPartition
	start  Offsets
	ends   map[topicPart]int64
}

func (r Reading) plan(ctx context.Context, c *consumer) (plan, error) {
	p := plan{start: Offsets{}, ends: map[topicPart]int64{}}
	for _, topic := range r.Topics {
		tps, err := r.partitions(ctx, c, topic)
		if err != nil {
			return plan{}, err
		}
		if r.From.kind == fromTime {
			if tps, err = offsetsAt(c, tps, r.From.at); err != nil {
				return plan{}, err
			}
		}
		var kept []kafka.TopicPartition
		for _, tp := range tps {
			from, end, ok, err := r.bounds(c, tp)
			if err != nil {
				return plan{}, err
			}
			if !ok {
				continue
			}
			tp.Offset = kafka.Offset(from)
			if r.To.kind != toForever {
				p.ends[topicPart{topic, tp.Partition}] = end
			}
			kept = append(kept, tp)
		}
		p.start[topic] = offsetsOf(kept)
		p.assign = append(p.assign, kept...)
	}
	return p, nil
}

// partitions lists topic's partitions, each with the start offset From gives
// without asking the broker about the partition (FromOffsets's; logical
// beginning otherwise).
func (r Reading) partitions(ctx context.Context, c *consumer, topic string) ([]kafka.TopicPartition, error) {
	if r.From.kind == fromOffsets || r.From.kind == fromOffsetsOrEarliest {
		var out []kafka.TopicPartition
		for p, off := range r.From.offsets[topic] {
			o := kafka.Offset(off)
			if off < 0 && r.From.kind == fromOffsetsOrEarliest {
				o = kafka.OffsetBeginning
			}
			out = append(out, kafka.TopicPartition{Topic: &topic, Partition: int32(p), Offset: o})
		}
		return out, nil
	}
	if r.To.kind == toForever {
		return startOffsets(ctx, c, topic)
	}
	tps, err := tryStartOffsets(c, topic)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: %w", err)
	}
	return tps, nil
}

// bounds says where tp is read from and up to (end is meaningful only for a
// bounded Read), or that it is not read at all (ok false).
func (r Reading) bounds(c *consumer, tp kafka.TopicPartition) (from, end int64, ok bool, err error) {
	topic := *tp.Topic
	from, end = int64(tp.Offset), -1
	var low, high int64
	if r.From.kind == fromEnd || r.From.kind == fromExtent || r.To.kind == toEnd {
		// On this read_committed consumer librdkafka asks ListOffsets with
		// isolation level read_committed, so "high" is the last stable
		// offset: records of a transaction open now come after it and are
		// read once it commits (integration test
		// TestFollowLiveOpenTransactionApacheKafka).
		if low, high, err = c.QueryWatermarkOffsets(topic, tp.Partition, 10000); err != nil {
			return 0, 0, false, fmt.Errorf("kafkaio: reading the extent of %s[%d]: %w", topic, tp.Partition, c.w.s.refusal(err, "Describe", "topic "+topic))
		}
	}
	switch r.From.kind {
	case fromEnd:
		from = high
	case fromExtent:
		if from, ok = r.From.choose(Extent{Topic: topic, Partition: tp.Partition, Low: low, High: high}); !ok {
			return 0, 0, false, nil
		}
		from = max(from, low)
	case fromBeginning:
		if r.To.kind == toEnd {
			from = low
		}
	}
	switch r.To.kind {
	case toEnd:
		end = high
	case toOffsets:
		to := r.To.offsets[topic]
		if int(tp.Partition) >= len(to) {
			return 0, 0, false, nil
		}
		end = to[tp.Partition]
	default:
		return from, end, true, nil
	}
	if from >= 0 && from >= end || from == int64(kafka.OffsetEnd) {
		return 0, 0, false, nil // nothing to read before the end
	}
	return from, end, true, nil
}

// loop hands every record c delivers to fn until ctx ends, fn fails, the
// client hits a fatal error or is refused (its credentials or certificate,
// or its principal denied one of the topics or its group: a
// *RefusedError), or, for a bounded Read, every partition of p.ends has
// been read to its end.
func (r Reading) loop(ctx context.Context, c *consumer, p plan, fn func(*port.Record) error) error {
	bounded := r.To.kind != toForever
	behind := map[topicPart]bool{} // partitions not yet read to where they ended at the start
	if r.OnCaughtUp != nil {
		for _, tp := range p.assign {
			behind[topicPart{*tp.Topic, tp.Partition}] = true
		}
	}
	caughtUp := func(k topicPart) {
		if len(behind) == 0 {
			return
		}
		delete(behind, k)
		if len(behind) == 0 {
			r.OnCaughtUp()
		}
	}
	done := func(k topicPart) {
		delete(p.ends, k)
		_ = c.IncrementalUnassign([]kafka.TopicPartition{{Topic: &k.topic, Partition: k.p}})
	}
	poll := 100
	if r.OnIdle != nil {
		poll = 20
	}
	for !bounded || len(p.ends) > 0 {
		if err := ctx.Err(); err != nil {
			if bounded {
				return fmt.Errorf("kafkaio: reading %v: %w", r.Topics, err)
			}
			return nil
		}
		if err := c.w.refusal(); err != nil {
			return err
		}
		switch e := c.Poll(poll).(type) {
		case nil:
			if r.OnIdle != nil {
				if err := r.OnIdle(); err != nil {
					return err
				}
			}
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				continue
			}
			k, off := topicPart{*e.TopicPartition.Topic, e.TopicPartition.Partition}, int64(e.TopicPartition.Offset)
			end, reading := p.ends[k]
			if bounded && (!reading || off >= end) {
				if reading {
					done(k)
				}
				continue
			}
			if err := fn(recordOf(e)); err != nil {
				return err
			}
			if bounded && off >= end-1 {
				done(k)
			}
		case kafka.PartitionEOF:
			k := topicPart{*e.Topic, e.Partition}
			caughtUp(k)
			if r.OnEOF != nil {
				if err := r.OnEOF(k.topic, k.p); err != nil {
					return err
				}
			}
			if _, reading := p.ends[k]; reading {
				done(k) // the end as read_committed sees it is at or before the bound
			}
		case kafka.Error:
			if err := c.denial(e, r.Topics); err != nil {
				return err
			}
			if e.Code() == kafka.ErrAutoOffsetReset {
				return fmt.Errorf("%w: %v", ErrOffsetOutOfRange, e)
			}
			if e.IsFatal() {
				return fmt.Errorf("kafkaio: reading %v: %w", r.Topics, e)
			}
		}
	}
	return nil
}

// offsetsAt replaces the offsets of tps by the first offset stamped at or
// after ts (the end, where there is none).
func offsetsAt(c *consumer, tps []kafka.TopicPartition, ts time.Time) ([]kafka.TopicPartition, error) {
	q := make([]kafka.TopicPartition, len(tps))
	for i, tp := range tps {
		q[i] = kafka.TopicPartition{Topic: tp.Topic, Partition: tp.Partition, Offset: kafka.Offset(ts.UnixMilli())}
	}
	out, err := c.OffsetsForTimes(q, 10000)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: seeking %s to %s: %w", *tps[0].Topic, ts.UTC().Format(time.RFC3339), err)
	}
	for i := range out {
		if out[i].Error != nil {
			return nil, fmt.Errorf("kafkaio: seeking %s[%d] to %s: %w", *out[i].Topic, out[i].Partition, ts.UTC().Format(time.RFC3339), out[i].Error)
		}
		if out[i].Offset < 0 {
			out[i].Offset = kafka.OffsetEnd
		}
	}
	return out, nil
}

// offsetsOf lays out per-partition offsets by partition number.
func offsetsOf(tps []kafka.TopicPartition) []int64 {
	n := 0
	for _, tp := range tps {
		n = max(n, int(tp.Partition)+1)
	}
	out := make([]int64, n)
	for _, tp := range tps {
		out[tp.Partition] = int64(tp.Offset)
	}
	return out
}

// retryClock paces metadata retries; a package variable so the rest of the
// package stays free of wall-clock calls.
var retryClock = clockwork.NewRealClock()

func tailID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// startOffsets asks the broker for every partition of topic (each with the
// logical offset of its beginning). While the topic does not exist yet or its partitions have no
// leader (just after it was created), it retries until ctx ends.
func startOffsets(ctx context.Context, c *consumer, topic string) ([]kafka.TopicPartition, error) {
	var last error
	for {
		out, err := tryStartOffsets(c, topic)
		if err == nil {
			return out, nil
		}
		var refused *RefusedError
		if errors.As(err, &refused) {
			return nil, refused
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("kafkaio: %w (gave up: %w)", last, ctx.Err())
		case <-retryClock.After(200 * time.Millisecond):
		}
	}
}

func tryStartOffsets(c *consumer, topic string) ([]kafka.TopicPartition, error) {
	md, err := c.metadata(&topic, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("reading metadata of %s: %w", topic, err)
	}
	t, ok := md.Topics[topic]
	if ok && t.Error.Code() == kafka.ErrTopicAuthorizationFailed {
		return nil, c.w.s.refusal(t.Error, "Describe", "topic "+topic)
	}
	if !ok || t.Error.Code() != kafka.ErrNoError || len(t.Partitions) == 0 {
		return nil, fmt.Errorf("topic %s is not available", topic)
	}
	out := make([]kafka.TopicPartition, 0, len(t.Partitions))
	for _, p := range t.Partitions {
		out = append(out, kafka.TopicPartition{Topic: &topic, Partition: p.ID, Offset: kafka.OffsetBeginning})
	}
	return out, nil
}
