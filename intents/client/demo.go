package client

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// DemoHandler answers {"agent": name, "echo": payload} after delay (with the
// attached context, if any: see demoAnswer), and fails
// a fraction errorRate of intents with a retryable error. Like many slow
// agents it works on past the intent's deadline, so Switchboard sees a late
// answer (which refreshes the fallback cache). A nil clock is the real one.
//
// A payload that is a JSON object with a "demo" object in it directs the
// handler for that one intent, so tests and demos can script an agent's
// behaviour from the intent itself:
//
//	{"demo": {"ignore": true}}   never answer (the handler returns ErrNoAnswer
//	                             at once: the Agent sends nothing, the intent
//	                             times out and gets its fallback)
//	{"demo": {"delay_ms": 250}}  answer after 250 ms instead of delay
//	                             (0 answers at once)
//
// The echo includes the "demo" object like the rest of the payload. Other
// fields of "demo", and a "demo" that is not an object, are ignored; a
// payload that is not an object is echoed as it is. The error rate applies to
// intents that are answered, after the delay.
func DemoHandler(name string, delay time.Duration, errorRate float64, clock clockwork.Clock) Handler {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return func(ctx context.Context, req *schemas.AgentRequest) (schemas.JSON, error) {
		d := demoDirectivesOf(req.Payload)
		if d.Ignore {
			return "", ErrNoAnswer
		}
		wait := delay
		if d.DelayMs != nil {
			wait = time.Duration(max(*d.DelayMs, 0)) * time.Millisecond
		}
		if wait > 0 {
			select {
			case <-clock.After(wait):
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		if errorRate > 0 && rand.Float64() < errorRate {
			return "", demoError{name}
		}
		return demoAnswer(name, req)
	}
}

// demoAnswer is {"agent": name, "echo": payload}, plus the context snapshot
// and its status when the router attached them ("context",
// "context_status"), so a demo shows what the agent received.
func demoAnswer(name string, req *schemas.AgentRequest) (schemas.JSON, error) {
	if req.ContextStatus == nil {
		return schemas.JSON(fmt.Sprintf(`{"agent":%q,"echo":%s}`, name, req.Payload)), nil
	}
	ctxJSON, err := json.Marshal(req.Context)
	if err != nil {
		return "", err
	}
	return schemas.JSON(fmt.Sprintf(`{"agent":%q,"echo":%s,"context":%s,"context_status":%q}`, name, req.Payload, ctxJSON, *req.ContextStatus)), nil
}

// demoDirectives is the "demo" object of a payload.
type demoDirectives struct {
	Ignore  bool   `json:"ignore"`
	DelayMs *int64 `json:"delay_ms"`
}

// demoDirectivesOf reads the "demo" object of payload; anything unreadable
// means no directives. Payloads without the word are not parsed at all.
func demoDirectivesOf(payload schemas.JSON) demoDirectives {
	var p struct {
		Demo json.RawMessage `json:"demo"`
	}
	var d demoDirectives
	if !strings.Contains(string(payload), `"demo"`) || json.Unmarshal([]byte(payload), &p) != nil || len(p.Demo) == 0 {
		return d
	}
	if json.Unmarshal(p.Demo, &d) != nil {
		return demoDirectives{}
	}
	return d
}

type demoError struct{ agent string }

func (e demoError) Error() string   { return e.agent + ": simulated failure" }
func (e demoError) Retryable() bool { return true }
