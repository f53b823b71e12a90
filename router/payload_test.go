package router_test

import (
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

const schemaConfig = `
agents:
  echo: {}
intents:
  order:
    agent: echo
    timeout: 2s
    input_schema:
      type: object
      properties: {amount: {type: number, minimum: 0}}
      required: [amount]
topics:
  partitions: 1
router:
  commit_interval: 2ms
`

// TestPayloadFailingItsSchemaIsRejected: an intent written to Kafka
// directly (no API checked it) whose payload fails the intent type's
// input_schema is never dispatched: it resolves rejected, class
// invalid_payload, with the schema error in the result and the dead letter.
func TestPayloadFailingItsSchemaIsRejected(t *testing.T) {
	both(t, testPayloadFailingItsSchemaIsRejected)
}

func testPayloadFailingItsSchemaIsRejected(t *testing.T, delivery string) {
	h := start(t, schemaConfig, delivery)
	h.request("bad-1", "order", `{"amount": -3}`)
	dl := h.wait(dlq, 1)
	if !hasHeader(dl, port.HeaderErrorClass, router.ClassInvalidPayload) {
		t.Fatalf("dead letter class: %v", dl.Headers)
	}
	msg := ""
	for _, x := range dl.Headers {
		if x.Key == port.HeaderErrorMessage {
			msg = string(x.Value)
		}
	}
	if !strings.Contains(msg, "/amount") {
		t.Fatalf("dead letter message %q does not name /amount", msg)
	}
	res := h.result(1)
	if res.IntentID != "bad-1" || res.Outcome != schemas.OutcomeRejected || res.Error == nil ||
		res.Error.Code != router.ClassInvalidPayload || !strings.Contains(res.Error.Message, "/amount") || res.IntentType != "order" {
		t.Fatalf("result %+v (error %+v)", res, res.Error)
	}

	// So is one that names a member twice: the schema would check the
	// last amount, an agent whose parser keeps the first would act on -3.
	h.request("dup-1", "order", `{"amount": -3, "amount": 3}`)
	h.wait(dlq, 2)
	if res := h.result(2); res.IntentID != "dup-1" || res.Outcome != schemas.OutcomeRejected || res.Error == nil ||
		res.Error.Code != router.ClassInvalidPayload || !strings.Contains(res.Error.Message, `"amount" appears twice`) {
		t.Fatalf("result %+v (error %+v)", res, res.Error)
	}

	// A payload that satisfies the schema is dispatched.
	h.request("ok-1", "order", `{"amount": 12}`)
	h.wait(echoTopic, 1)
}
