package router_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// reload applies yaml to the running router as serve's reload does.
func (h *harness) reload(yaml, delivery string) error {
	h.t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yaml), nil)
	if err != nil {
		h.t.Fatal(err)
	}
	cfg.Router.Delivery = delivery
	return h.r.Reconfigure(h.ctx, cfg)
}

// An intent dispatched before a reload times out at the deadline and with
// the fallback it was given; one after it, at the new ones.
func TestReconfigureKeepsPendingDeadlines(t *testing.T) {
	both(t, testReconfigureKeepsPendingDeadlines)
}

func testReconfigureKeepsPendingDeadlines(t *testing.T, delivery string) {
	h := start(t, testConfig, delivery)
	h.request("before", "fraud_check", `{}`)
	h.wait(slowTopic, 1)

	longer := strings.Replace(testConfig, "timeout: 300ms, fallback: {cache: {max_age: 10m}, static: {decision: review}}",
		"timeout: 1s, fallback: {static: {decision: deny}}", 1)
	if longer == testConfig {
		t.Fatal("the test's edit did not apply")
	}
	if err := h.reload(longer, delivery); err != nil {
		t.Fatal(err)
	}
	h.request("after", "fraud_check", `{}`)
	var ar schemas.AgentRequest
	if err := h.codec.Decode(h.wait(slowTopic, 2).Value, &ar); err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(time.Second).UnixMilli(); ar.Deadline != want {
		t.Fatalf("the intent after the reload has deadline %d, want %d (the new 1s timeout)", ar.Deadline, want)
	}

	h.advance(310 * time.Millisecond)
	res := h.result(1)
	if res.IntentID != "before" || res.Outcome != schemas.OutcomeFallbackStatic || string(*res.Answer) != `{"decision":"review"}` {
		t.Fatalf("the intent pending at the reload resolved %+v, want its own 300ms deadline and fallback", res)
	}
	if res.Timeline.Deadline != t0.Add(300*time.Millisecond).UnixMilli() {
		t.Fatalf("deadline of the intent pending at the reload = %d", res.Timeline.Deadline)
	}
	h.settle()
	if n := h.sink.Count(results); n != 1 {
		t.Fatalf("%d results at 310ms, want 1: the intent after the reload timed out at the old deadline", n)
	}
	h.advance(700 * time.Millisecond)
	res = h.result(2)
	if res.IntentID != "after" || res.Outcome != schemas.OutcomeFallbackStatic || string(*res.Answer) != `{"decision":"deny"}` {
		t.Fatalf("the intent after the reload resolved %+v, want the new fallback", res)
	}
}

// A reload that changes a key the router cannot take is refused whole: the
// intent types keep their old settings.
func TestReconfigureRefusesRestartKeys(t *testing.T) {
	h := start(t, testConfig, config.AtLeastOnce)
	next := strings.Replace(testConfig, "echo:        {agent: echo, timeout: 2s}", "echo:        {agent: echo, timeout: 9s}", 1)
	next = strings.Replace(next, "commit_interval: 2ms", "commit_interval: 5ms", 1)
	err := h.reload(next, config.AtLeastOnce)
	if !errors.Is(err, router.ErrNeedsRestart) || !strings.Contains(err.Error(), "router.commit_interval") {
		t.Fatalf("Reconfigure = %v, want ErrNeedsRestart naming router.commit_interval", err)
	}
	h.request("e-1", "echo", `{}`)
	var ar schemas.AgentRequest
	if err := h.codec.Decode(h.wait(echoTopic, 1).Value, &ar); err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(2 * time.Second).UnixMilli(); ar.Deadline != want {
		t.Fatalf("deadline %d, want %d: the refused reload changed the timeout", ar.Deadline, want)
	}
}

// Raising an agent's max_in_flight dispatches its queued intents at once;
// adding a breaker shows in its view.
func TestReconfigureRetunesAdmission(t *testing.T) {
	const one = `
agents:
  slow: {max_in_flight: 1}
intents:
  plain: {agent: slow, timeout: 5s}
topics: {partitions: 1}
`
	h := start(t, one, config.AtLeastOnce)
	h.request("q-1", "plain", `{}`)
	h.request("q-2", "plain", `{}`)
	h.wait(slowTopic, 1)
	h.settle()
	if n := h.sink.Count(slowTopic); n != 1 {
		t.Fatalf("%d dispatched with max_in_flight 1", n)
	}
	two := strings.Replace(one, "{max_in_flight: 1}", "{max_in_flight: 2, circuit_breaker: {consecutive_failures: 3}}", 1)
	if err := h.reload(two, config.AtLeastOnce); err != nil {
		t.Fatal(err)
	}
	h.wait(slowTopic, 2)
	views := h.r.Agents()
	if len(views) != 1 || views[0].MaxInFlight != 2 || views[0].Circuit != "closed" || views[0].InFlight != 2 {
		t.Fatalf("agent view after the reload %+v", views)
	}
}
