package schemas

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// payload200 is a ~200-byte JSON payload, the size the benchmarks use.
const payload200 = `{"amount":12,"currency":"EUR","order_id":"ord-7f3a9c","reason":"damaged in transit","customer":{"id":"c-1029","tier":"gold"},"items":[{"sku":"A-1","qty":2},{"sku":"B-7","qty":1}],"note":"ok"}`

func sampleRecords() []Record {
	return []Record{
		&IntentRequest{
			IntentID:    "i-1",
			IntentType:  "payments.refund",
			TargetAgent: Ptr("refunder"),
			ContextRef:  Ptr("c-1029"),
			TimeoutMs:   Ptr(int64(2500)),
			Payload:     JSON(payload200),
			SessionID:   Ptr("s-9"),
			Tenant:      Ptr("acme"),
			Traceparent: Ptr("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
			CreatedAt:   Ptr(int64(1767225600000)),
		},
		&IntentRequest{IntentID: "i-2", IntentType: "ping", Payload: `{}`},
		&AgentRequest{
			IntentID:   "i-1",
			IntentType: "payments.refund",
			Agent:      "refunder",
			Payload:    `{"amount":12}`,
			ContextRef: Ptr("c-1029"),
			Context: &ContextSnapshot{
				EntityID: "c-1029", SnapshotTs: 1767225590000, Version: 42,
				Features: map[string]float64{"ltv": 1234.5, "churn": 0.02},
			},
			Deadline: 1767225602500, Attempt: 1,
			SessionID: Ptr("s-9"), Tenant: Ptr("acme"), Traceparent: Ptr("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
			ContextStatus: Ptr(ContextFresh),
		},
		&AgentRequest{IntentID: "i-2", IntentType: "ping", Agent: "pinger", Payload: "", Deadline: 1, Attempt: 2},
		&AgentResponse{
			RequestID: "i-1", Agent: "refunder", Status: StatusOK,
			Answer: Ptr(JSON(`{"refunded":true,"id":"r-1"}`)), ProducedAt: Ptr(int64(1767225601000)),
		},
		&AgentResponse{
			RequestID: "i-3", Agent: "refunder", Status: StatusError,
			Error: &ErrorInfo{Code: "upstream_unavailable", Message: "bank API down", Retryable: true},
		},
		&IntentTimeout{
			IntentID: "i-4", IntentType: "payments.refund", Agent: "refunder",
			Deadline: 1767225602500, TimedOutAt: 1767225602510, ElapsedMs: 2510,
			Reason: ReasonDeadline, Fallback: FallbackCache,
		},
		&IntentResult{
			IntentID: "i-1", IntentType: "payments.refund", Agent: "refunder", Outcome: OutcomeAnswered,
			Answer: Ptr(JSON(payload200)), SessionID: Ptr("s-9"), Tenant: Ptr("acme"), Attempts: 1,
			Timeline: Timeline{
				ReceivedAt: 1767225600010, DispatchedAt: Ptr(int64(1767225600020)),
				AnsweredAt: Ptr(int64(1767225601000)), ResolvedAt: 1767225601001, Deadline: 1767225602500,
				ContextVersion: Ptr(int64(42)), ContextTs: Ptr(int64(1767225590000)),
			},
		},
		&IntentResult{
			IntentID: "i-5", IntentType: "x", Outcome: OutcomeRejected,
			Error:    &ErrorInfo{Code: "unroutable", Message: "no agent for intent type x"},
			Timeline: Timeline{ReceivedAt: 5, ResolvedAt: 6, Deadline: 7},
		},
		&ContextSnapshot{
			EntityID: "c-1029", SnapshotTs: 1767225590000, Version: 42,
			Features: map[string]float64{"ltv": 1234.5, "churn": 0.02}, SourceTopic: Ptr("features.customer"),
		},
		&ContextSnapshot{EntityID: "c-empty", Features: map[string]float64{}},
		&PendingIntent{
			IntentID: "i-1", IntentType: "payments.refund", Agent: "refunder", RecordTs: 1767225600000,
			ReceivedAt: 1767225600010, DispatchedAt: 1767225600020, Deadline: 1767225602500, Attempt: 1,
			CacheKey: "c-1029", Payload: JSON(payload200), ContextRef: Ptr("c-1029"), SessionID: Ptr("s-9"),
			Tenant: Ptr("acme"), Traceparent: Ptr("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
			ContextVersion: Ptr(int64(42)), ContextTs: Ptr(int64(1767225590000)),
		},
		&PendingIntent{IntentID: "i-2", IntentType: "ping", Agent: "pinger", Payload: `{}`, Attempt: 1},
		&FallbackAnswer{IntentType: "payments.refund", CacheKey: "c-1029", Answer: `{"refunded":true}`, AnsweredAt: 1767225601000},
		&AgentResponse{
			RequestID: "i-6", Agent: "writer", Status: StatusProgress, Attempt: Ptr(int32(1)),
			Message: Ptr("writing"), Progress: Ptr(3.0), Total: Ptr(10.0), Partial: Ptr(JSON(`{"text":"Kafka "}`)), Sequence: Ptr(int64(3)),
		},
		&IntentProgress{
			IntentID: "i-6", IntentType: "demo.write", Agent: "writer", Sequence: 3, Attempt: 1,
			Message: Ptr("writing"), Progress: Ptr(3.0), Total: Ptr(10.0), Partial: Ptr(JSON(`{"text":"Kafka "}`)),
			SessionID: Ptr("s-9"), Tenant: Ptr("acme"), ProducedAt: Ptr(int64(1767225601000)), ReceivedAt: 1767225601002,
		},
		&IntentProgress{IntentID: "i-7", IntentType: "ping", Agent: "pinger", Sequence: 1, Attempt: 1},
	}
}

// newZero returns a new zero record of r's type.
func newZero(r Record) Record {
	switch r.(type) {
	case *IntentRequest:
		return new(IntentRequest)
	case *AgentRequest:
		return new(AgentRequest)
	case *AgentResponse:
		return new(AgentResponse)
	case *IntentTimeout:
		return new(IntentTimeout)
	case *IntentResult:
		return new(IntentResult)
	case *ContextSnapshot:
		return new(ContextSnapshot)
	case *PendingIntent:
		return new(PendingIntent)
	case *FallbackAnswer:
		return new(FallbackAnswer)
	case *IntentProgress:
		return new(IntentProgress)
	}
	panic("unknown record type")
}

// allKinds has one nil pointer of each record type.
var allKinds = []Record{
	(*IntentRequest)(nil), (*AgentRequest)(nil), (*AgentResponse)(nil),
	(*IntentTimeout)(nil), (*IntentResult)(nil), (*ContextSnapshot)(nil),
	(*PendingIntent)(nil), (*FallbackAnswer)(nil), (*IntentProgress)(nil),
}

// newFakeRegistry starts an in-process Schema Registry, closed at cleanup.
func newFakeRegistry(tb testing.TB) (*srfake.Registry, *Registry) {
	tb.Helper()
	fake := srfake.New()
	tb.Cleanup(fake.Close)
	reg, err := NewRegistry(fake.URL())
	if err != nil {
		tb.Fatal(err)
	}
	return fake, reg
}

// newAvroCodec returns a codec writing Avro to a fresh fake registry.
func newAvroCodec(tb testing.TB, opts ...CodecOption) (*Codec, *srfake.Registry) {
	tb.Helper()
	fake, reg := newFakeRegistry(tb)
	c, err := NewCodec(append([]CodecOption{WithRegistry(reg)}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	return c, fake
}

func newJSONCodec(tb testing.TB, opts ...CodecOption) *Codec {
	tb.Helper()
	c, err := NewCodec(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func mustEncode(tb testing.TB, c *Codec, enc Encoding, topic string, r Record) []byte {
	tb.Helper()
	b, err := c.EncodeAs(enc, topic, r)
	if err != nil {
		tb.Fatalf("encode %T as %v: %v", r, enc, err)
	}
	return b
}

var bg = context.Background()
