package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// Update is one progress message of a handler: what it is doing, how far it
// is, and a part of its answer. Every field is optional.
type Update struct {
	// Message says what the agent is doing, for people ("searching").
	Message string
	// Progress of Total says how far it is (e.g. 40 of 100); nil: not said.
	Progress *float64
	Total    *float64
	// Partial is a part of the answer, one JSON document: a chunk of text
	// ({"text":"Hel"}), a delta, an intermediate result. "": none.
	Partial schemas.JSON
}

// Errors of Progress.
var (
	// ErrNotServing: the context is not a handler's (or derived from one).
	ErrNotServing = errors.New("client: progress outside a handler")
	// ErrAnswered: the handler has returned; its intent's answer is out.
	ErrAnswered = errors.New("client: progress after the handler returned")
)

// Progress sends an update for the intent that the handler owning ctx serves
// (ctx is the handler's context or derived from it), as an AgentResponse
// with status progress, the request's attempt and a sequence number (1, 2,
// 3, ... per call of the handler). It waits until the broker has the record,
// or ctx ends. Updates of one handler go out in the order Progress is
// called, all before its answer, even when several goroutines report; after
// the handler has returned, Progress returns ErrAnswered and sends nothing.
//
// Switchboard publishes each update to the intent's subscribers (WebSocket
// with progress: true, Server-Sent Events), and an update resets the intent
// type's idle_timeout (never its timeout). A partial that is not JSON is
// refused before anything is sent.
func Progress(ctx context.Context, u Update) error {
	r, ok := ctx.Value(reporterKey{}).(*reporter)
	if !ok {
		return ErrNotServing
	}
	return r.send(ctx, u)
}

type reporterKey struct{}

// reporter sends one handler call's progress.
type reporter struct {
	a   *Agent
	req *schemas.AgentRequest

	mu   sync.Mutex
	seq  int64
	done bool
}

// withReporter returns ctx carrying a reporter for req's handler.
func (a *Agent) withReporter(ctx context.Context, req *schemas.AgentRequest) (context.Context, *reporter) {
	r := &reporter{a: a, req: req}
	return context.WithValue(ctx, reporterKey{}, r), r
}

// finish stops r: progress after it is refused. It waits for an update being
// sent, so the answer goes out after it.
func (r *reporter) finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done = true
}

func (r *reporter) send(ctx context.Context, u Update) error {
	if u.Partial != "" && !u.Partial.Valid() {
		return fmt.Errorf("client: progress: partial is not a JSON document")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return ErrAnswered
	}
	cfg := r.a.cfg
	now := cfg.Clock.Now().UnixMilli()
	seq := r.seq + 1
	resp := &schemas.AgentResponse{
		RequestID: r.req.IntentID, Agent: cfg.Name, Status: schemas.StatusProgress,
		ProducedAt: &now, Attempt: &r.req.Attempt, Sequence: &seq,
		Progress: u.Progress, Total: u.Total,
	}
	if u.Message != "" {
		resp.Message = &u.Message
	}
	if u.Partial != "" {
		resp.Partial = &u.Partial
	}
	value, err := cfg.Codec.Encode(cfg.ResponsesTopic, resp)
	if err != nil {
		return fmt.Errorf("client: progress: %w", err)
	}
	if err := r.a.p.Send(ctx, cfg.ResponsesTopic, []byte(r.req.IntentID), value, nil, time.Time{}); err != nil {
		return fmt.Errorf("client: progress: %w", err)
	}
	r.seq = seq
	return nil
}
