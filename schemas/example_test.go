package schemas_test

import (
	"context"
	"fmt"
	"log"

	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// Without a registry a codec writes JSON: the wire format of records written
// by hand, with payloads embedded as JSON values and absent optional fields
// left out.
func ExampleCodec_Encode_json() {
	codec, err := schemas.NewCodec()
	if err != nil {
		log.Fatal(err)
	}
	b, err := codec.Encode("mcp.intent.request", &schemas.IntentRequest{
		IntentID:   "01JH8V2Q3R",
		IntentType: "payments.refund",
		TimeoutMs:  schemas.Ptr(int64(2000)),
		Payload:    `{"amount": 12, "currency": "EUR"}`,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(b))

	// Decoding accepts what a person types, and ignores fields it does not know.
	var resp schemas.AgentResponse
	in := `{"request_id": "01JH8V2Q3R", "agent": "refunder", "status": "ok",
	        "answer": {"refunded": true}, "comment": "ignored"}`
	if err := codec.Decode([]byte(in), &resp); err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Status, *resp.Answer)
	// Output:
	// {"intent_id":"01JH8V2Q3R","intent_type":"payments.refund","timeout_ms":2000,"payload":{"amount":12,"currency":"EUR"}}
	// ok {"refunded": true}
}

// With a registry a codec writes Avro in the Confluent wire format, and still
// reads JSON.
func ExampleNewCodec_registry() {
	fake := srfake.New() // in-process Schema Registry; use the real URL in production
	defer fake.Close()

	reg, err := schemas.NewRegistry(fake.URL()) // schemas.WithBasicAuth(key, secret) for Confluent Cloud
	if err != nil {
		log.Fatal(err)
	}
	codec, err := schemas.NewCodec(schemas.WithRegistry(reg))
	if err != nil {
		log.Fatal(err)
	}
	// Register ahead of time so Encode never waits for the registry.
	if err := codec.Prepare(context.Background(), "mcp.intent.result", (*schemas.IntentResult)(nil)); err != nil {
		log.Fatal(err)
	}
	b, err := codec.Encode("mcp.intent.result", &schemas.IntentResult{
		IntentID: "01JH8V2Q3R", IntentType: "payments.refund", Agent: "refunder",
		Outcome: schemas.OutcomeAnswered, Answer: schemas.Ptr(schemas.JSON(`{"refunded":true}`)),
		Attempts: 1, Timeline: schemas.Timeline{ReceivedAt: 1, ResolvedAt: 2, Deadline: 3},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%v, header % x\n", codec.Encoding(), b[:5])

	var res schemas.IntentResult
	if err := codec.Decode(b, &res); err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Outcome, *res.Answer)

	// A record that is neither JSON nor the wire format: a class for the
	// dead-letter topic.
	err = codec.Decode([]byte("hello"), &res)
	fmt.Println(schemas.ErrorClass(err))
	// Output:
	// avro, header 00 00 00 00 01
	// answered {"refunded":true}
	// unknown_format
}
