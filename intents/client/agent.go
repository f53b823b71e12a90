package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// Handler serves one intent. It returns the answer (a JSON document), or an
// error; an error that has a Retryable() bool method that returns true is
// reported as retryable. ctx ends when the agent stops; req.Deadline (unix
// ms) is when the caller stops waiting: a handler that should not work past it
// wraps ctx with clockwork.WithDeadline. A handler that returns ErrNoAnswer
// (or an error wrapping it) sends nothing: the intent is left to
// Switchboard's timeout and fallback. While it works, a handler may report
// progress with Progress(ctx, ...).
type Handler func(ctx context.Context, req *schemas.AgentRequest) (schemas.JSON, error)

// ErrNoAnswer is what a Handler returns to send no response at all, as an
// agent that crashed or lost the request would: Switchboard then times the
// intent out and answers with its fallback.
var ErrNoAnswer = errors.New("client: no answer")

// AgentConfig says which topics an agent serves and answers on.
type AgentConfig struct {
	Name           string
	Topic          string // default mcp.agent.<name>.request
	ResponsesTopic string // default mcp.agent.response
	GroupID        string // default switchboard-agent-<name>
	Kafka          kafkaio.Settings
	Codec          *schemas.Codec
	Concurrency    int // intents served at once; default 64
	Clock          clockwork.Clock
	Logger         *slog.Logger
}

// ErrCancelled is the cause (context.Cause) of a handler's context when
// Switchboard cancelled its intent; the error wraps it with the reason.
var ErrCancelled = errors.New("client: intent cancelled")

// Agent consumes its topic and answers each request on the responses topic.
// Delivery to the agent is at most once: offsets are committed as requests
// are read. Switchboard's timeouts and fallbacks cover a request lost that way.
//
// A cancel notice on the topic (header switchboard.control=cancel, see
// intents.Cancel) cancels the context of the handler serving that intent,
// with a cause wrapping ErrCancelled, and no response is sent for it
// whatever the handler returns. A cancel for an intent not in hand is
// ignored. The agent holds up to Concurrency intents being served and as
// many waiting for a slot; past that it stops reading its topic (and so
// reads no cancel notice) until a slot frees. A slot frees once the
// handler's response is handed to the producer: acknowledgements are
// pipelined, and Run waits for them (up to 5 s) before it returns.
type Agent struct {
	cfg AgentConfig
	h   Handler
	p   *kafkaio.Producer

	mu     sync.Mutex
	inHand map[string]map[*call]struct{} // by intent id
}

// call is one request in hand: waiting for a slot or being served.
type call struct {
	cancel context.CancelCauseFunc
}

// NewAgent builds an agent.
func NewAgent(cfg AgentConfig, h Handler) (*Agent, error) {
	if cfg.Name == "" || h == nil || cfg.Codec == nil {
		return nil, errors.New("client: an agent needs a name, a handler and a codec")
	}
	if cfg.Topic == "" {
		cfg.Topic = "mcp.agent." + cfg.Name + ".request"
	}
	if cfg.ResponsesTopic == "" {
		cfg.ResponsesTopic = "mcp.agent.response"
	}
	if cfg.GroupID == "" {
		cfg.GroupID = "switchboard-agent-" + cfg.Name
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 64
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p, err := kafkaio.NewProducer(cfg.Kafka)
	if err != nil {
		return nil, err
	}
	return &Agent{cfg: cfg, h: h, p: p, inHand: map[string]map[*call]struct{}{}}, nil
}

// Run serves until ctx ends, then waits for the intents in hand and closes.
func (a *Agent) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	slots := make(chan struct{}, a.cfg.Concurrency)   // intents being served
	waiting := make(chan struct{}, a.cfg.Concurrency) // intents waiting for a slot
	defer func() {
		wg.Wait()
		a.p.Close(5 * time.Second)
	}()
	return kafkaio.Consume(ctx, a.cfg.Kafka, a.cfg.GroupID, []string{a.cfg.Topic}, func(rec *router.Record) error {
		if kind, ok := controlOf(rec); ok {
			a.control(kind, rec)
			return nil
		}
		var req schemas.AgentRequest
		if err := a.cfg.Codec.Decode(rec.Value, &req); err != nil {
			a.cfg.Logger.Warn("agent: undecodable request skipped", "agent", a.cfg.Name, "offset", rec.Offset, "error", err)
			return nil
		}
		select {
		case waiting <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		callCtx, cancel := context.WithCancelCause(ctx)
		c := a.track(req.IntentID, cancel)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer a.untrack(req.IntentID, c)
			select {
			case slots <- struct{}{}:
				<-waiting
			case <-callCtx.Done(): // cancelled, or the agent stops, while waiting
				<-waiting
				return
			}
			defer func() { <-slots }()
			if callCtx.Err() != nil { // cancelled as the slot came free
				return
			}
			a.serve(callCtx, &req)
		}()
		return nil
	})
}

// controlOf returns the kind of a control record (its switchboard.control
// header).
func controlOf(rec *router.Record) (string, bool) {
	for _, h := range rec.Headers {
		if h.Key == intents.HeaderControl {
			return string(h.Value), true
		}
	}
	return "", false
}

// control handles a control record: a cancel notice cancels the intent's
// calls in hand; other kinds are not for agents.
func (a *Agent) control(kind string, rec *router.Record) {
	if kind != intents.ControlCancel {
		a.cfg.Logger.Debug("agent: control record skipped", "agent", a.cfg.Name, "kind", kind, "offset", rec.Offset)
		return
	}
	c, err := intents.UnmarshalCancel(rec.Key, rec.Value)
	if err != nil {
		a.cfg.Logger.Warn("agent: unreadable cancel notice skipped", "agent", a.cfg.Name, "offset", rec.Offset, "error", err)
		return
	}
	cause := ErrCancelled
	if c.Reason != "" {
		cause = fmt.Errorf("%w: %s", ErrCancelled, c.Reason)
	}
	a.mu.Lock()
	n := len(a.inHand[c.IntentID])
	for x := range a.inHand[c.IntentID] {
		x.cancel(cause)
	}
	a.mu.Unlock()
	if n > 0 {
		a.cfg.Logger.Info("agent: intent cancelled", "agent", a.cfg.Name, "intent_id", c.IntentID, "reason", c.Reason)
	}
}

func (a *Agent) track(id string, cancel context.CancelCauseFunc) *call {
	c := &call{cancel: cancel}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inHand[id] == nil {
		a.inHand[id] = map[*call]struct{}{}
	}
	a.inHand[id][c] = struct{}{}
	return c
}

func (a *Agent) untrack(id string, c *call) {
	c.cancel(nil) // release the context's resources
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.inHand[id], c)
	if len(a.inHand[id]) == 0 {
		delete(a.inHand, id)
	}
}

// serve runs the handler and sends its response, unless ctx ended meanwhile:
// the agent is stopping, or the intent was cancelled.
func (a *Agent) serve(ctx context.Context, req *schemas.AgentRequest) {
	hctx, rep := a.withReporter(ctx, req)
	answer, err := a.h(hctx, req)
	rep.finish() // no progress after the answer (progress.go)
	if ctx.Err() != nil || errors.Is(err, ErrNoAnswer) {
		return
	}
	now := a.cfg.Clock.Now().UnixMilli()
	resp := &schemas.AgentResponse{RequestID: req.IntentID, Agent: a.cfg.Name, Status: schemas.StatusOK, ProducedAt: &now, Attempt: &req.Attempt}
	if err != nil {
		var r interface{ Retryable() bool }
		resp.Status = schemas.StatusError
		resp.Error = &schemas.ErrorInfo{Code: "agent_error", Message: err.Error(), Retryable: errors.As(err, &r) && r.Retryable()}
	} else {
		resp.Answer = &answer
	}
	// The response is handed to the producer and the slot freed at once:
	// acknowledgements are pipelined, so a slow one does not hold a slot
	// (with 64 slots, an agent waiting for each ack could answer at most
	// 64 ÷ the ack time per second). Run's end waits for them (Close).
	value, err := a.cfg.Codec.Encode(a.cfg.ResponsesTopic, resp)
	if err == nil {
		id := req.IntentID
		err = a.p.SendAsync(a.cfg.ResponsesTopic, []byte(id), value, nil, time.Time{}, func(err error) {
			if err != nil {
				a.cfg.Logger.Warn("agent: answering", "agent", a.cfg.Name, "intent_id", id, "error", err)
			}
		})
	}
	if err != nil && ctx.Err() == nil {
		a.cfg.Logger.Warn("agent: answering", "agent", a.cfg.Name, "intent_id", req.IntentID, "error", err)
	}
}
