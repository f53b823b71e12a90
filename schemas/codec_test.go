package schemas

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/sr/srfake"
)

func TestRoundTrip(t *testing.T) {
	c, _ := newAvroCodec(t)
	for _, enc := range []Encoding{EncodingJSON, EncodingAvro} {
		for i, r := range sampleRecords() {
			t.Run(fmt.Sprintf("%v/%d-%T", enc, i, r), func(t *testing.T) {
				b := mustEncode(t, c, enc, "mcp.test", r)
				got := newZero(r)
				if err := c.Decode(b, got); err != nil {
					t.Fatalf("decode: %v\n%q", err, b)
				}
				if !reflect.DeepEqual(got, r) {
					t.Fatalf("round trip changed the record:\n got %+v\nwant %+v", got, r)
				}
			})
		}
	}
}

func TestAvroWireFormat(t *testing.T) {
	c, fake := newAvroCodec(t)
	if got := c.Encoding(); got != EncodingAvro {
		t.Fatalf("Encoding() = %v, want avro", got)
	}
	r := sampleRecords()[0]
	b, err := c.Encode("mcp.intent.request", r)
	if err != nil {
		t.Fatal(err)
	}
	ss, ok := fake.GetSchema("mcp.intent.request-value", 1)
	if !ok {
		t.Fatal("schema not registered under mcp.intent.request-value")
	}
	if b[0] != 0 || binary.BigEndian.Uint32(b[1:5]) != uint32(ss.ID) {
		t.Fatalf("header % x, want 00 + id %d", b[:5], ss.ID)
	}
	// The registered schema is the full .avsc: docs and defaults included.
	if !strings.Contains(ss.Schema.Schema, `"default":null`) || !strings.Contains(ss.Schema.Schema, `"doc":`) {
		t.Fatalf("registered schema lost its defaults or docs: %.200s", ss.Schema.Schema)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(AvroSchema(r))); err != nil {
		t.Fatal(err)
	}
	if ss.Schema.Schema != compact.String() {
		t.Fatalf("registered schema differs from the .avsc file")
	}
}

func TestJSONCodecDefaults(t *testing.T) {
	c := newJSONCodec(t)
	if got := c.Encoding(); got != EncodingJSON {
		t.Fatalf("Encoding() = %v, want json", got)
	}
	b, err := c.Encode("mcp.intent.request", &IntentRequest{IntentID: "i", IntentType: "t", Payload: `{"amount": 12}`})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"intent_id":"i","intent_type":"t","payload":{"amount":12}}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	// An Avro codec also writes JSON when asked: an agent's `encoding: json`.
	ac, _ := newAvroCodec(t)
	b2 := mustEncode(t, ac, EncodingJSON, "mcp.agent.x.request", &IntentRequest{IntentID: "i", IntentType: "t", Payload: `{"amount": 12}`})
	if string(b2) != want {
		t.Fatalf("EncodeAs(JSON) on an Avro codec: %s", b2)
	}
	// And WithDefaultEncoding makes JSON its default.
	jc := newJSONCodec(t, WithRegistry(ac.reg), WithDefaultEncoding(EncodingJSON))
	if jc.Encoding() != EncodingJSON {
		t.Fatal("WithDefaultEncoding(JSON) ignored")
	}
}

func TestJSONNaturalPayload(t *testing.T) {
	c := newJSONCodec(t)
	in := " \n\t{\"intent_id\": \"i-1\", \"intent_type\": \"payments.refund\",\n \"payload\": {\"amount\": 12, \"note\": \"<b>\"},\n \"timeout_ms\": 2500}\n"
	var r IntentRequest
	if err := c.Decode([]byte(in), &r); err != nil {
		t.Fatal(err)
	}
	if r.Payload != `{"amount": 12, "note": "<b>"}` {
		t.Fatalf("payload = %q", r.Payload)
	}
	if r.TimeoutMs == nil || *r.TimeoutMs != 2500 || r.IntentID != "i-1" {
		t.Fatalf("decoded %+v", r)
	}
	b, err := c.Encode("t", &r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"payload":{"amount":12,"note":"<b>"}`) {
		t.Fatalf("payload not embedded as JSON (or HTML-escaped): %s", b)
	}
}

func TestJSONForwardCompatible(t *testing.T) {
	c := newJSONCodec(t)
	var resp AgentResponse
	in := `{"request_id":"i-1","agent":"a","status":"paused","answer":[1,2],"priority":7,"extra":{"x":[1]}}`
	if err := c.Decode([]byte(in), &resp); err != nil {
		t.Fatalf("unknown fields must be ignored: %v", err)
	}
	if resp.Status != StatusUnknown {
		t.Fatalf("unknown status symbol decoded as %q, want unknown", resp.Status)
	}
	if resp.Answer == nil || *resp.Answer != `[1,2]` {
		t.Fatalf("answer = %v", resp.Answer)
	}
	var res IntentResult
	if err := c.Decode([]byte(`{"intent_id":"i","outcome":"teleported","timeline":{"received_at":1}}`), &res); err != nil {
		t.Fatal(err)
	}
	if res.Outcome != OutcomeUnknown || res.Timeline.ReceivedAt != 1 {
		t.Fatalf("decoded %+v", res)
	}
	var to IntentTimeout
	if err := c.Decode([]byte(`{"intent_id":"i"}`), &to); err != nil {
		t.Fatal(err)
	}
	if to.Reason != ReasonUnknown || to.Fallback != FallbackUnknown {
		t.Fatalf("missing enums decoded as %q/%q, want unknown", to.Reason, to.Fallback)
	}
}

func TestDecodeOverwrites(t *testing.T) {
	c, _ := newAvroCodec(t)
	for _, enc := range []Encoding{EncodingJSON, EncodingAvro} {
		b := mustEncode(t, c, enc, "t", &ContextSnapshot{EntityID: "e", Features: map[string]float64{"a": 1}})
		old := &ContextSnapshot{EntityID: "old", Features: map[string]float64{"stale": 1}, SourceTopic: Ptr("x")}
		if err := c.Decode(b, old); err != nil {
			t.Fatal(err)
		}
		want := &ContextSnapshot{EntityID: "e", Features: map[string]float64{"a": 1}}
		if !reflect.DeepEqual(old, want) {
			t.Fatalf("%v: decode merged into the old record: %+v", enc, old)
		}
	}
}

// avroBody returns an Avro record (wire format) for r with its header and
// body split, written through c.
func avroParts(t *testing.T, c *Codec, topic string, r Record) (hdr, body []byte) {
	t.Helper()
	b := mustEncode(t, c, EncodingAvro, topic, r)
	return b[:wireHeaderLen], b[wireHeaderLen:]
}

func TestDecodeRejects(t *testing.T) {
	c, _ := newAvroCodec(t, WithMaxRecordBytes(4096))
	jsonOnly := newJSONCodec(t)

	req := sampleRecords()[0]
	hdr, body := avroParts(t, c, "mcp.intent.request", req)
	valid := append(append([]byte{}, hdr...), body...)
	notJSON := &IntentRequest{IntentID: "i", IntentType: "t", Payload: "not json"}
	njBody, err := c.api.Marshal(c.schemas[kindIntentRequest].schema, notJSON)
	if err != nil {
		t.Fatal(err)
	}
	notJSONRec := append(append([]byte{}, hdr...), njBody...)
	resp := &AgentResponse{RequestID: "i", Agent: "a", Status: StatusOK, Answer: Ptr(JSON("{oops"))}
	rh, _ := avroParts(t, c, "mcp.agent.response", &AgentResponse{RequestID: "i", Agent: "a", Status: StatusOK})
	rb, err := c.api.Marshal(c.schemas[kindAgentResponse].schema, resp)
	if err != nil {
		t.Fatal(err)
	}
	badAnswer := append(append([]byte{}, rh...), rb...)
	unknownID := append([]byte{0, 0, 0, 0x7f, 0x7f}, body...)
	wrongMagic := append([]byte{1}, valid[1:]...)

	tests := []struct {
		name  string
		codec *Codec
		data  []byte
		into  Record
		class string
		is    error
	}{
		{"empty", c, nil, new(IntentRequest), ClassEmpty, ErrEmpty},
		{"wrong magic byte", c, wrongMagic, new(IntentRequest), ClassUnknownFormat, ErrUnknownFormat},
		{"JSON array", c, []byte(`[1]`), new(IntentRequest), ClassUnknownFormat, ErrUnknownFormat},
		{"JSON null", c, []byte(`null`), new(IntentRequest), ClassUnknownFormat, ErrUnknownFormat},
		{"whitespace only", c, []byte(" \n"), new(IntentRequest), ClassUnknownFormat, ErrUnknownFormat},
		{"header only", c, valid[:3], new(IntentRequest), ClassMalformedAvro, ErrMalformed},
		{"truncated Avro", c, valid[:len(valid)-3], new(IntentRequest), ClassMalformedAvro, ErrMalformed},
		{"truncated Avro body", c, valid[:wireHeaderLen+2], new(IntentRequest), ClassMalformedAvro, ErrMalformed},
		{"trailing bytes", c, append(append([]byte{}, valid...), 0, 0), new(IntentRequest), ClassMalformedAvro, ErrMalformed},
		{"unknown schema id", c, unknownID, new(IntentRequest), ClassUnknownSchema, ErrUnknownSchemaID},
		{"other record type", c, valid, new(IntentResult), ClassIncompatibleSchema, ErrIncompatibleSchema},
		{"payload not JSON", c, notJSONRec, new(IntentRequest), ClassInvalidPayload, ErrInvalidPayload},
		{"answer not JSON", c, badAnswer, new(AgentResponse), ClassInvalidPayload, ErrInvalidPayload},
		{"Avro without registry", jsonOnly, valid, new(IntentRequest), ClassNoRegistry, ErrNoRegistry},
		{"oversized Avro", c, append([]byte{0, 0, 0, 0, 1}, make([]byte, 4096)...), new(IntentRequest), ClassTooLarge, ErrTooLarge},
		{"oversized JSON", c, []byte(`{"intent_id":"` + strings.Repeat("x", 4096) + `"}`), new(IntentRequest), ClassTooLarge, ErrTooLarge},
		{"broken JSON", c, []byte(`{"intent_id":"i"`), new(IntentRequest), ClassMalformedJSON, ErrMalformed},
		{"JSON trailing garbage", c, []byte(`{"intent_id":"i"} x`), new(IntentRequest), ClassMalformedJSON, ErrMalformed},
		{"JSON wrong type", c, []byte(`{"intent_id":5}`), new(IntentRequest), ClassMalformedJSON, ErrMalformed},
		{"JSON fractional long", c, []byte(`{"deadline":1.5}`), new(AgentRequest), ClassMalformedJSON, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.codec.Decode(tt.data, tt.into)
			if err == nil {
				t.Fatalf("decoded %+v, want an error", tt.into)
			}
			if got := ErrorClass(err); got != tt.class {
				t.Errorf("class = %q, want %q (err: %v)", got, tt.class, err)
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("error %v does not wrap %v", err, tt.is)
			}
			if _, ok := errors.AsType[*DecodeError](err); !ok {
				t.Errorf("error %T is not a *DecodeError", err)
			}
			if !strings.HasPrefix(err.Error(), "schemas: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}

func TestDecodeIntoNil(t *testing.T) {
	c := newJSONCodec(t)
	for _, r := range allKinds {
		if err := c.Decode([]byte(`{}`), r); err == nil {
			t.Errorf("Decode into nil %T succeeded", r)
		}
	}
	if err := c.Decode([]byte(`{}`), nil); err == nil {
		t.Error("Decode into nil succeeded")
	}
}

func TestEncodeRejects(t *testing.T) {
	c, _ := newAvroCodec(t, WithMaxRecordBytes(1024))
	jsonOnly := newJSONCodec(t)
	big := JSON(`"` + strings.Repeat("x", 2000) + `"`)
	tests := []struct {
		name  string
		codec *Codec
		enc   Encoding
		r     Record
		is    error
	}{
		{"payload not JSON", c, EncodingDefault, &IntentRequest{Payload: "{nope"}, ErrInvalidRecord},
		{"answer not JSON", c, EncodingJSON, &AgentResponse{Status: StatusOK, Answer: Ptr(JSON("nope"))}, ErrInvalidRecord},
		{"bad status", c, EncodingAvro, &AgentResponse{Status: "fine"}, ErrInvalidRecord},
		{"empty status", c, EncodingJSON, &AgentResponse{}, ErrInvalidRecord},
		{"bad reason", c, EncodingAvro, &IntentTimeout{Reason: "bored", Fallback: FallbackNone}, ErrInvalidRecord},
		{"bad fallback", c, EncodingAvro, &IntentTimeout{Reason: ReasonIdle, Fallback: "magic"}, ErrInvalidRecord},
		{"bad outcome", c, EncodingAvro, &IntentResult{Outcome: "meh"}, ErrInvalidRecord},
		{"NaN feature as JSON", c, EncodingJSON, &ContextSnapshot{Features: map[string]float64{"x": math.NaN()}}, ErrInvalidRecord},
		{"nil record", c, EncodingJSON, (*IntentResult)(nil), ErrInvalidRecord},
		{"too large Avro", c, EncodingAvro, &IntentRequest{Payload: big}, ErrTooLarge},
		{"too large JSON", c, EncodingJSON, &IntentRequest{Payload: big}, ErrTooLarge},
		{"Avro without registry", jsonOnly, EncodingAvro, &IntentRequest{}, ErrNoRegistry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.codec.EncodeAs(tt.enc, "t", tt.r)
			if !errors.Is(err, tt.is) {
				t.Fatalf("EncodeAs = %q, %v; want %v", b, err, tt.is)
			}
		})
	}
	// NaN is fine in Avro (a double), and comes back.
	b := mustEncode(t, c, EncodingAvro, "t", &ContextSnapshot{Features: map[string]float64{"x": math.NaN()}})
	var cs ContextSnapshot
	if err := c.Decode(b, &cs); err != nil || !math.IsNaN(cs.Features["x"]) {
		t.Fatalf("NaN round trip: %v, %v", cs.Features, err)
	}
}

func TestNewCodecOptions(t *testing.T) {
	if _, err := NewCodec(WithDefaultEncoding(EncodingAvro)); !errors.Is(err, ErrNoRegistry) {
		t.Errorf("Avro without registry: %v, want ErrNoRegistry", err)
	}
	if _, err := NewCodec(WithMaxRecordBytes(3)); err == nil {
		t.Error("max record bytes 3 accepted")
	}
	if _, err := NewCodec(WithDefaultEncoding(Encoding(9))); err == nil {
		t.Error("unknown encoding accepted")
	}
	c := newJSONCodec(t)
	if _, err := c.EncodeAs(Encoding(9), "t", &IntentRequest{}); err == nil {
		t.Error("EncodeAs with an unknown encoding succeeded")
	}
	if err := c.Prepare(bg, "t", (*IntentRequest)(nil)); err != nil {
		t.Errorf("Prepare without registry: %v", err)
	}
	if err := c.Prepare(bg, "t", nil); err == nil {
		t.Error("Prepare with a nil Record succeeded")
	}
	ac, _ := newAvroCodec(t)
	if _, err := ac.Encode("", &IntentRequest{}); err == nil {
		t.Error("Avro with an empty topic succeeded")
	}
}

// countRequests counts the registry's HTTP requests by method.
func countRequests(fake *srfake.Registry) func(method string) int {
	var mu sync.Mutex
	n := map[string]int{}
	fake.Intercept(func(_ http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		n[r.Method]++
		mu.Unlock()
		return false
	})
	return func(method string) int {
		mu.Lock()
		defer mu.Unlock()
		return n[method]
	}
}

func TestRegistersOnceAndCaches(t *testing.T) {
	c, fake := newAvroCodec(t)
	count := countRequests(fake)
	recs := sampleRecords()

	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 16 {
		wg.Go(func() {
			for _, r := range recs {
				b, err := c.Encode("mcp.topic", r)
				if err != nil {
					errs <- err
					return
				}
				got := newZero(r)
				if err := c.Decode(b, got); err != nil {
					errs <- err
					return
				}
				if !reflect.DeepEqual(got, r) {
					errs <- fmt.Errorf("round trip changed %+v", r)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Six record types under one subject: six registrations (the fake gives
	// each type a version), and no fetch: the codec knows its own ids.
	if got := count(http.MethodPost); got != int(numKinds) {
		t.Errorf("%d registrations, want %d", got, numKinds)
	}
	if got := count(http.MethodGet); got != 0 {
		t.Errorf("%d schema fetches, want 0", got)
	}

	// Another codec (another process) fetches each writer schema once.
	reg, err := NewRegistry(fake.URL())
	if err != nil {
		t.Fatal(err)
	}
	reader := newJSONCodec(t, WithRegistry(reg))
	var encoded [][]byte
	for _, r := range recs {
		encoded = append(encoded, mustEncode(t, c, EncodingAvro, "mcp.topic", r))
	}
	for range 8 {
		wg.Go(func() {
			for i, b := range encoded {
				if err := reader.Decode(b, newZero(recs[i])); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if got := count(http.MethodGet); got != int(numKinds) {
		t.Errorf("%d schema fetches, want %d", got, numKinds)
	}
}

func TestPrepare(t *testing.T) {
	c, fake := newAvroCodec(t)
	for _, r := range allKinds {
		if err := c.Prepare(bg, "mcp.prepared", r); err != nil {
			t.Fatal(err)
		}
	}
	count := countRequests(fake)
	for _, r := range sampleRecords() {
		mustEncode(t, c, EncodingDefault, "mcp.prepared", r)
	}
	if got := count(http.MethodPost); got != 0 {
		t.Errorf("Encode after Prepare made %d registrations", got)
	}
}

func TestRegistryDown(t *testing.T) {
	c, fake := newAvroCodec(t)
	b := mustEncode(t, c, EncodingAvro, "t", sampleRecords()[0])

	// A second codec has never seen the schema id; its registry is down.
	reg, err := NewRegistry(fake.URL())
	if err != nil {
		t.Fatal(err)
	}
	fake.Close()
	c2 := newJSONCodec(t, WithRegistry(reg))
	err = c2.Decode(b, new(IntentRequest))
	if ErrorClass(err) != ClassRegistryUnavailable || !IsTransient(err) {
		t.Fatalf("decode with the registry down: class %q, transient %v: %v", ErrorClass(err), IsTransient(err), err)
	}
	if _, err := c2.Encode("t", sampleRecords()[0]); !IsTransient(err) {
		t.Fatalf("encode with the registry down: %v, want transient", err)
	}
	// The first codec has everything cached and does not need the registry.
	if err := c.Decode(b, new(IntentRequest)); err != nil {
		t.Fatalf("cached decode: %v", err)
	}
}

func TestErrorClass(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("boom"), ClassOther},
		{fmt.Errorf("x: %w", ErrTooLarge), ClassTooLarge},
		{fmt.Errorf("x: %w", ErrInvalidRecord), ClassInvalidRecord},
		{fmt.Errorf("x: %w", &DecodeError{Class: ClassMalformedJSON, Err: ErrMalformed}), ClassMalformedJSON},
		{&RegistryError{StatusCode: 503, kind: ErrRegistryUnavailable}, ClassRegistryUnavailable},
	}
	for _, tt := range tests {
		if got := ErrorClass(tt.err); got != tt.want {
			t.Errorf("ErrorClass(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestEncodingText(t *testing.T) {
	for _, e := range []Encoding{EncodingDefault, EncodingJSON, EncodingAvro} {
		b, err := e.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var got Encoding
		if err := got.UnmarshalText(b); err != nil || got != e {
			t.Errorf("%v: text %q parsed as %v, %v", e, b, got, err)
		}
	}
	if _, err := ParseEncoding("protobuf"); err == nil {
		t.Error("ParseEncoding(protobuf) succeeded")
	}
	if _, err := Encoding(7).MarshalText(); err == nil {
		t.Error("MarshalText of Encoding(7) succeeded")
	}
}
