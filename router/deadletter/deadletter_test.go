package deadletter_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/router/deadletter"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
)

var at = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// record is a dead-letter record as the router writes it.
func record(partition int32, offset int64, ts time.Time, class, from string, value []byte) *port.Record {
	return &port.Record{
		Topic: "dlq", Partition: partition, Offset: offset, TimestampMs: ts.UnixMilli(),
		Key: []byte("k-1"), Value: value,
		Headers: []port.Header{
			{Key: "traceparent", Value: []byte("00-abc-def-01")},
			{Key: port.HeaderOriginalTopic, Value: []byte(from)},
			{Key: port.HeaderOriginalPartition, Value: []byte("3")},
			{Key: port.HeaderOriginalOffset, Value: []byte("41")},
			{Key: port.HeaderErrorClass, Value: []byte(class)},
			{Key: port.HeaderErrorMessage, Value: []byte("no route for intent type \"x\"")},
		},
	}
}

func TestFromRecordDecodesTheDeadLetterHeaders(t *testing.T) {
	l := deadletter.FromRecord(record(1, 7, at, "unroutable", "requests", []byte(`{}`)))
	if l.OriginalTopic != "requests" || l.OriginalPartition != 3 || l.OriginalOffset != 41 ||
		l.Class != "unroutable" || l.Message != `no route for intent type "x"` || !l.Timestamp.Equal(at) ||
		l.Position() != (deadletter.Position{Partition: 1, Offset: 7}) {
		t.Fatalf("letter = %+v", l)
	}
	// A record without the headers (not the router's) says so.
	bare := deadletter.FromRecord(&port.Record{Topic: "dlq", Offset: 1})
	if bare.OriginalPartition != -1 || bare.OriginalOffset != -1 || bare.OriginalTopic != "" {
		t.Fatalf("bare letter = %+v", bare)
	}
}

func TestReplayHeadersDropTheDeadLetterOnesAndSayWhereFrom(t *testing.T) {
	rec := record(2, 9, at, "unroutable", "requests", nil)
	// A record replayed once and dead-lettered again carries an old mark.
	rec.Headers = append([]port.Header{{Key: deadletter.HeaderReplayedFrom, Value: []byte("dlq/0/1")}}, rec.Headers...)
	got := deadletter.FromRecord(rec).ReplayHeaders()
	want := []port.Header{
		{Key: "traceparent", Value: []byte("00-abc-def-01")},
		{Key: deadletter.HeaderReplayedFrom, Value: []byte("dlq/2/9")},
	}
	if len(got) != len(want) {
		t.Fatalf("headers %v, want %v", got, want)
	}
	for i := range want {
		if got[i].Key != want[i].Key || !bytes.Equal(got[i].Value, want[i].Value) {
			t.Fatalf("headers %v, want %v", got, want)
		}
	}
}

func TestFilterMatch(t *testing.T) {
	l := deadletter.FromRecord(record(1, 50, at, "unroutable", "requests", nil))
	p1, p0 := int32(1), int32(0)
	cases := []struct {
		name string
		set  func(*deadletter.Filter)
		want bool
	}{
		{"everything", func(*deadletter.Filter) {}, true},
		{"class", func(f *deadletter.Filter) { f.Class = "unroutable" }, true},
		{"other class", func(f *deadletter.Filter) { f.Class = "malformed_json" }, false},
		{"topic", func(f *deadletter.Filter) { f.Topic = "requests" }, true},
		{"other topic", func(f *deadletter.Filter) { f.Topic = "responses" }, false},
		{"since: inclusive", func(f *deadletter.Filter) { f.Since = at }, true},
		{"since: later", func(f *deadletter.Filter) { f.Since = at.Add(time.Millisecond) }, false},
		{"until: exclusive", func(f *deadletter.Filter) { f.Until = at }, false},
		{"until: later", func(f *deadletter.Filter) { f.Until = at.Add(time.Millisecond) }, true},
		{"partition", func(f *deadletter.Filter) { f.Partition = &p1 }, true},
		{"other partition", func(f *deadletter.Filter) { f.Partition = &p0 }, false},
		{"offset range", func(f *deadletter.Filter) { f.FromOffset, f.ToOffset = 50, 50 }, true},
		{"below the range", func(f *deadletter.Filter) { f.FromOffset = 51 }, false},
		{"above the range", func(f *deadletter.Filter) { f.ToOffset = 49 }, false},
		{"position", func(f *deadletter.Filter) { f.Positions = []deadletter.Position{{0, 50}, {1, 50}} }, true},
		{"other positions", func(f *deadletter.Filter) { f.Positions = []deadletter.Position{{0, 50}, {1, 51}} }, false},
		{"all of them", func(f *deadletter.Filter) {
			f.Class, f.Topic, f.Since, f.Partition, f.Positions = "unroutable", "requests", at, &p1, []deadletter.Position{{1, 50}}
		}, true},
		{"all but one", func(f *deadletter.Filter) {
			f.Class, f.Topic, f.Since, f.Partition = "unroutable", "responses", at, &p1
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := deadletter.NewFilter()
			tc.set(&f)
			if got := f.Match(l); got != tc.want {
				t.Fatalf("Match = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFilterStartSkipsWhatItExcludes(t *testing.T) {
	e := kafkaio.Extent{Partition: 1, Low: 10, High: 100}
	p0 := int32(0)
	cases := []struct {
		name string
		set  func(*deadletter.Filter)
		from int64
		ok   bool
	}{
		{"everything", func(*deadletter.Filter) {}, 10, true},
		{"other partition", func(f *deadletter.Filter) { f.Partition = &p0 }, 0, false},
		{"from an offset", func(f *deadletter.Filter) { f.FromOffset = 40 }, 40, true},
		{"below the first kept", func(f *deadletter.Filter) { f.FromOffset = 2 }, 10, true},
		{"range below the first kept", func(f *deadletter.Filter) { f.ToOffset = 5 }, 0, false},
		{"positions elsewhere", func(f *deadletter.Filter) { f.Positions = []deadletter.Position{{0, 40}} }, 0, false},
		{"first position here", func(f *deadletter.Filter) { f.Positions = []deadletter.Position{{1, 70}, {0, 5}, {1, 60}} }, 60, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := deadletter.NewFilter()
			tc.set(&f)
			from, ok := f.Start(e)
			if ok != tc.ok || (ok && from != tc.from) {
				t.Fatalf("Start = %d, %v; want %d, %v", from, ok, tc.from, tc.ok)
			}
		})
	}
}

func TestParsers(t *testing.T) {
	ps, err := deadletter.ParsePositions("0:12, 3:40")
	if err != nil || len(ps) != 2 || ps[0] != (deadletter.Position{0, 12}) || ps[1] != (deadletter.Position{3, 40}) {
		t.Fatalf("ParsePositions = %v, %v", ps, err)
	}
	for _, bad := range []string{"", "12", "0:x", "-1:3", "0:-3", "0:1,2"} {
		if _, err := deadletter.ParsePositions(bad); err == nil {
			t.Errorf("ParsePositions(%q) accepted", bad)
		}
	}
	for in, want := range map[string][2]int64{"120-130": {120, 130}, "120-": {120, -1}, "-130": {-1, 130}, "7": {7, 7}} {
		from, to, err := deadletter.ParseOffsetRange(in)
		if err != nil || from != want[0] || to != want[1] {
			t.Errorf("ParseOffsetRange(%q) = %d, %d, %v; want %v", in, from, to, err, want)
		}
	}
	for _, bad := range []string{"", "-", "a-b", "130-120", "1-2-3", "-5-"} {
		if _, _, err := deadletter.ParseOffsetRange(bad); err == nil {
			t.Errorf("ParseOffsetRange(%q) accepted", bad)
		}
	}
	for in, want := range map[string]time.Time{
		"90m":                       at.Add(-90 * time.Minute),
		"2026-12-01T08:30:00Z":      time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC),
		"2026-12-01T08:30:00+01:00": time.Date(2026, 12, 1, 7, 30, 0, 0, time.UTC),
		"2026-12-01":                time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
	} {
		if got, err := deadletter.ParseTime(in, at); err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "yesterday", "-5m", "2026-13-01"} {
		if _, err := deadletter.ParseTime(bad, at); err == nil {
			t.Errorf("ParseTime(%q) accepted", bad)
		}
	}
}

func TestWriteRow(t *testing.T) {
	var b bytes.Buffer
	l := deadletter.FromRecord(record(1, 7, at, "unroutable", "requests", []byte("{\"intent_type\":\"x\",\n\"payload\":\"ééééé\"}")))
	if err := deadletter.WriteRow(&b, l, 32); err != nil { // 32 cuts the first é in half
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"1:7 ", "2026-12-02T10:00:00.000Z", "requests[3]@41", "unroutable", "k-1", `no route for intent type "x"`,
		"value: {\"intent_type\":\"x\", \"payload\":\"…\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("row lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "\n") != 2 || !utf8.ValidString(out) {
		t.Errorf("row is not two lines:\n%s", out)
	}
	b.Reset()
	l.Value = []byte{0, 0, 0, 0, 1, 0xff}
	_ = deadletter.WriteRow(&b, l, 100)
	if !strings.Contains(b.String(), "value: base64:AAAAAAH/") {
		t.Errorf("binary value not shown as base64:\n%s", b.String())
	}
}

func TestLetterJSON(t *testing.T) {
	value := []byte{0, 0, 0, 0, 1, 0xff, 'x'} // Avro: not UTF-8
	l := deadletter.FromRecord(record(1, 7, at, "unknown_schema", "requests", value))
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Partition int32  `json:"partition"`
		Offset    int64  `json:"offset"`
		Timestamp string `json:"timestamp"`
		Original  struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Offset    int64  `json:"offset"`
		} `json:"original"`
		Error         struct{ Class, Message string } `json:"error"`
		ValueEncoding string                          `json:"value_encoding"`
		Headers       []struct{ Key, Value string }
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Partition != 1 || got.Offset != 7 || got.Timestamp != "2026-12-02T10:00:00Z" ||
		got.Original.Topic != "requests" || got.Original.Partition != 3 || got.Original.Offset != 41 ||
		got.Error.Class != "unknown_schema" || got.ValueEncoding != "base64" || len(got.Headers) != 6 {
		t.Fatalf("json %s", b)
	}
	var raw map[string]any
	_ = json.Unmarshal(b, &raw)
	if dec, err := base64.StdEncoding.DecodeString(raw["value"].(string)); err != nil || !bytes.Equal(dec, value) {
		t.Fatalf("value %v does not decode to the record's value", raw["value"])
	}
	if raw["key"] != "k-1" || raw["key_encoding"] != nil {
		t.Fatalf("key %v / %v, want the text k-1", raw["key"], raw["key_encoding"])
	}
	// A text value is kept as text, in full.
	long := strings.Repeat(`{"a":1}`, 100)
	l.Value = []byte(long)
	b, _ = json.Marshal(l)
	raw = nil
	_ = json.Unmarshal(b, &raw)
	if raw["value"] != long || raw["value_encoding"] != nil {
		t.Fatalf("value %v", raw["value"])
	}
}

type sent struct {
	topic      string
	key, value []byte
	headers    []port.Header
}

type fakeSender struct {
	mu   sync.Mutex
	sent []sent
	fail map[string]bool // by key
}

func (f *fakeSender) Send(_ context.Context, topic string, key, value []byte, headers []port.Header, ts time.Time) error {
	if !ts.IsZero() {
		return errors.New("a replay must get a new timestamp")
	}
	if f.fail[string(key)] {
		return errors.New("broker said no")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, sent{topic, key, value, headers})
	return nil
}

func TestReplaySendsEachLetterToItsTarget(t *testing.T) {
	a := deadletter.FromRecord(record(0, 1, at, "unroutable", "requests", []byte("a")))
	b := deadletter.FromRecord(record(0, 2, at, "unroutable", "requests", []byte("b")))
	b.Key = []byte("k-b")
	noOrigin := deadletter.FromRecord(&port.Record{Topic: "dlq", Offset: 3, Key: []byte("k-3")})
	loop := deadletter.FromRecord(record(0, 4, at, "unroutable", "dlq", []byte("d")))
	fs := &fakeSender{fail: map[string]bool{"k-b": true}}
	res := deadletter.Replay(context.Background(), fs, []*deadletter.Letter{a, b, noOrigin, loop}, "", 2)
	if res[0].Err != nil || res[0].Topic != "requests" {
		t.Errorf("a: %+v", res[0])
	}
	if res[1].Err == nil {
		t.Errorf("b: the failed send is not reported")
	}
	if res[2].Err == nil || !strings.Contains(res[2].Err.Error(), "original topic") {
		t.Errorf("a letter without an origin: %v", res[2].Err)
	}
	if res[3].Err == nil || !strings.Contains(res[3].Err.Error(), "dead-letter topic") {
		t.Errorf("a letter from the dead-letter topic itself: %v", res[3].Err)
	}
	if len(fs.sent) != 1 || fs.sent[0].topic != "requests" || string(fs.sent[0].key) != "k-1" || string(fs.sent[0].value) != "a" ||
		len(fs.sent[0].headers) != 2 || string(fs.sent[0].headers[1].Value) != "dlq/0/1" {
		t.Fatalf("sent %+v", fs.sent)
	}
	// --to sends everything there, the letter without an origin included.
	fs = &fakeSender{}
	res = deadletter.Replay(context.Background(), fs, []*deadletter.Letter{a, noOrigin}, "elsewhere", 1)
	if res[0].Err != nil || res[1].Err != nil || len(fs.sent) != 2 || fs.sent[0].topic != "elsewhere" || fs.sent[1].topic != "elsewhere" {
		t.Fatalf("with a target: %+v, sent %+v", res, fs.sent)
	}
}
