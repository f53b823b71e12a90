package client

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

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
// Switchboard's timeout and fallback.
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

// Agent consumes its topic and answers each request on the responses topic.
// Delivery to the agent is at most once: offsets are committed as requests
// are read. Switchboard's timeouts and fallbacks cover a request lost that way.
type Agent struct {
	cfg AgentConfig
	h   Handler
	p   *kafkaio.Producer
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
	return &Agent{cfg: cfg, h: h, p: p}, nil
}

// Run serves until ctx ends, then waits for the intents in hand and closes.
func (a *Agent) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	sem := make(chan struct{}, a.cfg.Concurrency)
	defer func() {
		wg.Wait()
		a.p.Close(5 * time.Second)
	}()
	return kafkaio.Consume(ctx, a.cfg.Kafka, a.cfg.GroupID, []string{a.cfg.Topic}, func(rec *router.Record) error {
		var req schemas.AgentRequest
		if err := a.cfg.Codec.Decode(rec.Value, &req); err != nil {
			a.cfg.Logger.Warn("agent: undecodable request skipped", "agent", a.cfg.Name, "offset", rec.Offset, "error", err)
			return nil
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			a.serve(ctx, &req)
		}()
		return nil
	})
}

func (a *Agent) serve(ctx context.Context, req *schemas.AgentRequest) {
	answer, err := a.h(ctx, req)
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
	value, err := a.cfg.Codec.Encode(a.cfg.ResponsesTopic, resp)
	if err == nil {
		err = a.p.Send(ctx, a.cfg.ResponsesTopic, []byte(req.IntentID), value, nil, time.Time{})
	}
	if err != nil && ctx.Err() == nil {
		a.cfg.Logger.Warn("agent: answering", "agent", a.cfg.Name, "intent_id", req.IntentID, "error", err)
	}
}
