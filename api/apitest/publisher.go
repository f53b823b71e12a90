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
	"github.com/switchboard-mcp/switchboard/schemas"
)

var _ api.Publisher = (*Publisher)(nil)

// Publisher records every intent request it is given. Its zero value is ready
// to use and accepts everything. It is safe for concurrent use.
type Publisher struct {
	// Func, if set, is called by PublishIntent with each request (after the
	// request is recorded) and its error is returned. Set it before use.
	Func func(ctx context.Context, req *schemas.IntentRequest) error

	mu       sync.Mutex
	requests []*schemas.IntentRequest
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
