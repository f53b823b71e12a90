package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/intents/client"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// responsesOf reads the responses topic until want records were read.
func (b *agentBench) responsesOf(want int) []*schemas.AgentResponse {
	b.t.Helper()
	var out []*schemas.AgentResponse
	enough := errors.New("enough")
	err := kafkaio.Read(b.ctx, b.s, kafkaio.Reading{Topics: []string{b.responses}, From: kafkaio.FromBeginning()}, func(rec *port.Record) error {
		var r schemas.AgentResponse
		if err := b.codec.Decode(rec.Value, &r); err != nil {
			return err
		}
		if string(rec.Key) != r.RequestID {
			b.t.Errorf("response of %s keyed %q", r.RequestID, rec.Key)
		}
		out = append(out, &r)
		if len(out) == want {
			return enough
		}
		return nil
	})
	if !errors.Is(err, enough) {
		b.t.Fatalf("read %d responses of %d: %v", len(out), want, err)
	}
	return out
}

// The writer demo agent streams its answer word by word through Progress:
// numbered updates of the request's attempt, in order, then the answer,
// whose text is the partials' in sequence.
func TestWriterStreamsProgressThenAnswers(t *testing.T) {
	b := newAgentBench(t)
	b.run(client.WriterHandler("writer", nil))
	v, err := b.codec.Encode(b.requests, &schemas.AgentRequest{
		IntentID: "w-1", IntentType: "demo.write", Agent: "writer", Attempt: 2, Deadline: 1,
		Payload: `{"text":"one two three","words":5,"delay_ms":0}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.p.Send(b.ctx, b.requests, []byte("w-1"), v, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	got := b.responsesOf(6)
	var text strings.Builder
	for i, r := range got[:5] {
		if r.Status != schemas.StatusProgress || r.Sequence == nil || *r.Sequence != int64(i+1) || r.Attempt == nil || *r.Attempt != 2 ||
			*r.Progress != float64(i+1) || *r.Total != 5 || *r.Message != "writing" || r.Partial == nil {
			t.Fatalf("update %d: %+v", i+1, r)
		}
		var p struct{ Text string }
		if err := json.Unmarshal([]byte(*r.Partial), &p); err != nil {
			t.Fatal(err)
		}
		text.WriteString(p.Text)
	}
	final := got[5]
	var answer struct {
		Text  string
		Words int
	}
	if final.Status != schemas.StatusOK || json.Unmarshal([]byte(*final.Answer), &answer) != nil {
		t.Fatalf("answer %+v", final)
	}
	if answer.Text != "one two three one two" || answer.Words != 5 || text.String() != answer.Text {
		t.Fatalf("answer %+v, partials %q", answer, text.String())
	}
}

// Progress needs a handler's context and a live handler; a partial that is
// not JSON is refused before anything is sent.
func TestProgressOutsideAndAfterTheHandler(t *testing.T) {
	if err := client.Progress(context.Background(), client.Update{Message: "x"}); !errors.Is(err, client.ErrNotServing) {
		t.Fatalf("outside a handler: %v", err)
	}
	b := newAgentBench(t)
	kept := make(chan context.Context, 1)
	bad := make(chan error, 1)
	b.run(func(ctx context.Context, req *schemas.AgentRequest) (schemas.JSON, error) {
		bad <- client.Progress(ctx, client.Update{Partial: "not json"})
		kept <- ctx
		return `{"ok":true}`, nil
	})
	b.request("i-1")
	if err := <-bad; err == nil || !strings.Contains(err.Error(), "not a JSON document") {
		t.Fatalf("bad partial: %v", err)
	}
	ctx := <-kept
	b.request("i-2")
	if seen := b.responsesUntil("i-2"); strings.Join(seen, ",") != "i-1,i-2" {
		t.Fatalf("responses %v: the bad partial was sent", seen)
	}
	if err := client.Progress(context.WithoutCancel(ctx), client.Update{Message: "late"}); !errors.Is(err, client.ErrAnswered) {
		t.Fatalf("after the handler returned: %v", err)
	}
}

// Progress echoes the request's tenant like the answer: the router pairs a
// progress message by (tenant, id), and one without a tenant is ambiguous
// while two tenants' intents of that id are with the agent.
func TestProgressEchoesTheTenant(t *testing.T) {
	b := newAgentBench(t)
	b.run(client.WriterHandler("writer", nil))
	v, err := b.codec.Encode(b.requests, &schemas.AgentRequest{
		IntentID: "w-1", IntentType: "demo.write", Agent: "writer", Attempt: 1, Deadline: 1, Tenant: schemas.Ptr("acme"),
		Payload: `{"text":"one two","words":2,"delay_ms":0}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.p.Send(b.ctx, b.requests, []byte("w-1"), v, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	for i, r := range b.responsesOf(3) {
		if r.Tenant == nil || *r.Tenant != "acme" {
			t.Fatalf("response %d (%s) names tenant %v, want acme", i+1, r.Status, r.Tenant)
		}
	}
}
