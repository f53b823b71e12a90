package kafkaio_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/router/embedded"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
)

// TestScanReadsToTheEndAndStops: Read FromExtent ToEnd (was Scan) reads what each partition held, from
// where start says, skips the partitions start excludes, and returns by
// itself at the end.
func TestScanReadsToTheEndAndStops(t *testing.T) {
	c, err := embedded.Start(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := kafkaio.Settings{Bootstrap: c.Bootstrap()}
	const topic = "scan.me"
	if _, err := kafkaio.CreateTopics(ctx, s, []kafkaio.TopicSpec{{Name: topic, Partitions: 3, ReplicationFactor: 1}}); err != nil {
		t.Fatal(err)
	}
	p, err := kafkaio.NewProducer(s)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(time.Second)
	for part := range int32(2) { // partition 2 stays empty
		for i := range 5 {
			if err := p.SendTo(ctx, topic, part, []byte(fmt.Sprintf("k%d-%d", part, i)), []byte("v"), nil, time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
	}

	var extents []kafkaio.Extent
	got := map[int32][]int64{}
	err = kafkaio.Read(ctx, s, kafkaio.Reading{Topics: []string{topic}, To: kafkaio.ToEnd(), From: kafkaio.FromExtent(func(e kafkaio.Extent) (int64, bool) {
		extents = append(extents, e)
		switch e.Partition {
		case 0:
			return 2, true // from offset 2
		case 1:
			return 0, false // skipped
		}
		return 0, true // empty: nothing to read, and no wait for it
	})}, func(rec *port.Record) error {
		got[rec.Partition] = append(got[rec.Partition], rec.Offset)
		return nil
	})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if len(extents) != 3 {
		t.Fatalf("extents %+v, want one per partition", extents)
	}
	for _, e := range extents {
		want := int64(5)
		if e.Partition == 2 {
			want = 0
		}
		if e.Low != 0 || e.High != want {
			t.Errorf("extent %+v, want 0..%d", e, want)
		}
	}
	if fmt.Sprint(got) != "map[0:[2 3 4]]" {
		t.Fatalf("read %v, want offsets 2-4 of partition 0 only", got)
	}

	// fn's error ends the scan and is returned.
	stop := errors.New("stop")
	n := 0
	err = kafkaio.Read(ctx, s, kafkaio.Reading{Topics: []string{topic}, From: kafkaio.FromBeginning(), To: kafkaio.ToEnd()}, func(*port.Record) error {
		n++
		return stop
	})
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("Read = %v after %d records, want stop after 1", err, n)
	}
	if err := kafkaio.Read(ctx, s, kafkaio.Reading{Topics: []string{"no.such.topic"}, From: kafkaio.FromBeginning(), To: kafkaio.ToEnd()}, func(*port.Record) error { return nil }); err == nil {
		t.Fatal("a bounded Read of a missing topic succeeded")
	}
}

// TestReadOptions: the options that replaced ReadRange (FromOffsets,
// ToOffsets), Follow (FromTime, OnCaughtUp), FollowLive and Tail (OnStart)
// and FollowFrom (FromOffsetsOrEarliest, OnEOF, OnIdle) read what they say, and a Group reading anything but the beginning,
// forever, is refused.
func TestReadOptions(t *testing.T) {
	c, err := embedded.Start(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := kafkaio.Settings{Bootstrap: c.Bootstrap()}
	const topic = "read.options"
	if _, err := kafkaio.CreateTopics(ctx, s, []kafkaio.TopicSpec{{Name: topic, Partitions: 2, ReplicationFactor: 1}}); err != nil {
		t.Fatal(err)
	}
	p, err := kafkaio.NewProducer(s)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(time.Second)
	base := time.UnixMilli(1_700_000_000_000)
	for part := range int32(2) {
		for i := range 5 {
			ts := base.Add(time.Duration(i) * time.Minute)
			if err := p.SendTo(ctx, topic, part, []byte(fmt.Sprintf("k%d-%d", part, i)), []byte("v"), nil, ts); err != nil {
				t.Fatal(err)
			}
		}
	}
	collect := func(got map[int32][]int64) func(*port.Record) error {
		return func(rec *port.Record) error {
			got[rec.Partition] = append(got[rec.Partition], rec.Offset)
			return nil
		}
	}

	// [from, to) per partition; a partition whose range is empty is not read.
	got := map[int32][]int64{}
	err = kafkaio.Read(ctx, s, kafkaio.Reading{
		From: kafkaio.FromOffsets(kafkaio.Offsets{topic: {1, 3}}),
		To:   kafkaio.ToOffsets(kafkaio.Offsets{topic: {4, 3}}),
	}, collect(got))
	if err != nil {
		t.Fatalf("Read FromOffsets ToOffsets: %v", err)
	}
	if fmt.Sprint(got) != "map[0:[1 2 3]]" {
		t.Fatalf("read %v, want offsets 1-3 of partition 0 only", got)
	}
	// A bound past the end stops at the end.
	got = map[int32][]int64{}
	err = kafkaio.Read(ctx, s, kafkaio.Reading{
		From: kafkaio.FromOffsets(kafkaio.Offsets{topic: {3, 4}}),
		To:   kafkaio.ToOffsets(kafkaio.Offsets{topic: {99, 99}}),
	}, collect(got))
	if err != nil || fmt.Sprint(got) != "map[0:[3 4] 1:[4]]" {
		t.Fatalf("Read to past the end = %v, read %v; want offsets 3-4 and 4", err, got)
	}

	// From a time, forever: OnStart, then the records from it, then
	// OnCaughtUp once both partitions are read to their ends.
	got = map[int32][]int64{}
	rctx, stop := context.WithCancel(ctx)
	var started, caughtUp int
	err = kafkaio.Read(rctx, s, kafkaio.Reading{
		Topics:     []string{topic},
		From:       kafkaio.FromTime(base.Add(3 * time.Minute)),
		OnStart:    func(kafkaio.Offsets) { started++ },
		OnCaughtUp: func() { caughtUp++; stop() },
	}, collect(got))
	if err != nil {
		t.Fatalf("Read FromTime: %v", err)
	}
	if started != 1 || caughtUp != 1 || fmt.Sprint(got) != "map[0:[3 4] 1:[3 4]]" {
		t.Fatalf("OnStart %d times, OnCaughtUp %d times, read %v; want 1, 1 and offsets 3-4 of both", started, caughtUp, got)
	}

	// From the end, forever: OnStart gets the ends.
	rctx, stop = context.WithCancel(ctx)
	var start kafkaio.Offsets
	err = kafkaio.Read(rctx, s, kafkaio.Reading{Topics: []string{topic}, OnStart: func(o kafkaio.Offsets) { start = o; stop() }},
		func(*port.Record) error { return errors.New("read a record before any was written") })
	if err != nil || fmt.Sprint(start) != "map[read.options:[5 5]]" {
		t.Fatalf("Read FromEnd = %v, OnStart(%v); want nil and the ends 5, 5", err, start)
	}

	// FollowFrom's options: a negative offset starts at the beginning;
	// OnEOF hears of each partition's end, OnIdle of the quiet after.
	got = map[int32][]int64{}
	rctx, stop = context.WithCancel(ctx)
	eofs := map[int32]bool{}
	idle := 0
	err = kafkaio.Read(rctx, s, kafkaio.Reading{
		From: kafkaio.FromOffsetsOrEarliest(kafkaio.Offsets{topic: {-1, 3}}),
		OnEOF: func(tp string, part int32) error {
			if tp != topic {
				return fmt.Errorf("OnEOF(%s)", tp)
			}
			eofs[part] = true
			return nil
		},
		OnIdle: func() error {
			if len(eofs) == 2 {
				idle++
				stop()
			}
			return nil
		},
	}, collect(got))
	if err != nil || fmt.Sprint(got) != "map[0:[0 1 2 3 4] 1:[3 4]]" || idle != 1 {
		t.Fatalf("Read FromOffsetsOrEarliest = %v, read %v, idle after both ends %d times; want nil, 0-4 and 3-4, once", err, got, idle)
	}

	for _, r := range []kafkaio.Reading{
		{Topics: []string{topic}, Group: "g", From: kafkaio.FromEnd()},
		{Topics: []string{topic}, Group: "g", From: kafkaio.FromBeginning(), To: kafkaio.ToEnd()},
	} {
		if err := kafkaio.Read(ctx, s, r, func(*port.Record) error { return nil }); !errors.Is(err, kafkaio.ErrReading) {
			t.Errorf("Read(%+v) = %v, want ErrReading", r, err)
		}
	}
}
