// Package apitest provides test doubles for package api, in the manner of
// net/http/httptest: a recording [Publisher], and a [Log] that stands in for
// the results and timeouts topics (feeding an api.Results and replaying
// resumes).
package apitest

import (
	"context"
	"slices"
	"sync"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/schemas"
)

var _ api.Publisher = (*Publisher)(nil)

// Publisher records every intent request and cancel it is given. Its zero
// value is ready to use and accepts everything. It is safe for concurrent use.
type Publisher struct {
	// Func, if set, is called by PublishIntent with each request (after the
	// request is recorded) and its error is returned. Set it before use.
	Func func(ctx context.Context, req *schemas.IntentRequest) error
	// CancelFunc, if set, is called by PublishCancel with each cancel (after
	// it is recorded) and its error is returned. Set it before use.
	CancelFunc func(ctx context.Context, c intents.Cancel) error

	mu       sync.Mutex
	requests []*schemas.IntentRequest
	cancels  []intents.Cancel
}

// PublishIntent records req, then calls Func if set.
func (p *Publisher) PublishIntent(ctx context.Context, req *schemas.IntentRequest) error {
	p.mu.Lock()
	p.requests = append(p.requests, req)
	p.mu.Unlock()
	if p.Func != nil {
		return p.Func(ctx, req)
	}
	return nil
}

// PublishCancel records c, then calls CancelFunc if set.
func (p *Publisher) PublishCancel(ctx context.Context, c intents.Cancel) error {
	p.mu.Lock()
	p.cancels = append(p.cancels, c)
	p.mu.Unlock()
	if p.CancelFunc != nil {
		return p.CancelFunc(ctx, c)
	}
	return nil
}

// Cancels returns the cancels recorded so far, oldest first.
func (p *Publisher) Cancels() []intents.Cancel {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.cancels)
}

// Requests returns the requests recorded so far, oldest first.
func (p *Publisher) Requests() []*schemas.IntentRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.requests)
}

// Result returns an answered result for an intent request, as the router
// would publish it, with the given answer (a JSON document).
func Result(req *schemas.IntentRequest, answer string) *schemas.IntentResult {
	res := &schemas.IntentResult{
		IntentID:   req.IntentID,
		IntentType: req.IntentType,
		Agent:      "test-agent",
		Outcome:    schemas.OutcomeAnswered,
		SessionID:  req.SessionID,
		Tenant:     req.Tenant,
		Attempts:   1,
	}
	if answer != "" {
		res.Answer = schemas.Ptr(schemas.JSON(answer))
	}
	if req.CreatedAt != nil {
		res.Timeline = schemas.Timeline{ReceivedAt: *req.CreatedAt, ResolvedAt: *req.CreatedAt, Deadline: *req.CreatedAt}
	}
	return res
}
