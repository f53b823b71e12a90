package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/intents/payload"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// middleware serves tools/list and tools/call from the catalog; every
// other method goes to the SDK.
func (e *Endpoint) middleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (_ sdk.Result, err error) {
		// The SDK runs handlers on goroutines of its own, without a
		// recover: a bug here must not take the process down.
		defer func() {
			if p := recover(); p != nil {
				e.cfg.Logger.Error("mcp handler panicked", slog.String("method", method), slog.Any("panic", p))
				err = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
			}
		}()
		switch method {
		case "tools/list":
			return e.listTools(req)
		case "tools/call":
			if r, ok := req.(*sdk.CallToolRequest); ok {
				res, err := e.callTool(ctx, r)
				if ctr, ok := res.(*sdk.CallToolResult); ok && modern(r.ProtocolVersion()) {
					return &completeResult{inner: ctr}, err
				}
				return res, err
			}
		case "tasks/get", "tasks/result", "tasks/cancel", "tasks/update", "tasks/list":
			if res, ok, err := e.taskMethod(ctx, method, req); ok {
				return res, err
			}
		}
		return next(ctx, method, req)
	}
}

// tenantOf is the caller's tenant, as the API's guard found it ("" with
// authentication off).
func tenantOf(req sdk.Request) string {
	if x := req.GetExtra(); x != nil && x.TokenInfo != nil {
		return x.TokenInfo.UserID
	}
	return ""
}

// toolWire is a tool as tools/list writes it: the SDK's Tool has no
// execution field (2025-11-25 task support).
type toolWire struct {
	Name         string           `json:"name"`
	Title        string           `json:"title,omitempty"`
	Description  string           `json:"description"`
	InputSchema  json.RawMessage  `json:"inputSchema"`
	OutputSchema json.RawMessage  `json:"outputSchema,omitempty"`
	Annotations  *annotationsWire `json:"annotations,omitempty"`
	Execution    executionWire    `json:"execution"`
}

type annotationsWire struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

type executionWire struct {
	TaskSupport string `json:"taskSupport"`
}

type toolsList struct {
	sdk.ResultBase
	Tools []toolWire `json:"tools"`
	// 2026-07-28 (SEP-2549): a complete, cacheable result. The list is
	// the tenant's, so private; it is not cached (a configuration reload
	// changes it: SetCatalog, which notifies sessions).
	ResultType string `json:"resultType,omitempty"`
	TTLMs      *int   `json:"ttlMs,omitempty"`
	CacheScope string `json:"cacheScope,omitempty"`
}

// anyObject is the input schema of an intent type without one.
var anyObject = json.RawMessage(`{"type":"object"}`)

// listTools answers tools/list: one tool per intent type the caller's
// tenant may use, in the catalog's order (by name), on one page.
func (e *Endpoint) listTools(req sdk.Request) (sdk.Result, error) {
	tenant := tenantOf(req)
	out := &toolsList{Tools: []toolWire{}}
	if r, ok := req.(*sdk.ListToolsRequest); ok && modern(r.ProtocolVersion()) {
		zero := 0
		out.ResultType, out.TTLMs, out.CacheScope = "complete", &zero, "private"
	}
	for _, t := range e.catalog().IntentTypes {
		if !e.allowed(tenant, t.Name) {
			continue
		}
		w := toolWire{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: anyObject, Execution: executionWire{TaskSupport: "optional"}}
		if w.Description == "" {
			w.Description = fmt.Sprintf("Switchboard intent type %s (agent %s, timeout %d ms).", t.Name, t.Agent, t.TimeoutMs)
		}
		if t.InputSchema != nil {
			w.InputSchema = t.InputSchema.JSON()
		}
		if t.OutputSchema != nil {
			w.OutputSchema = t.OutputSchema.JSON()
		}
		if a := t.Annotations; a != nil {
			w.Annotations = &annotationsWire{Title: t.Title, ReadOnlyHint: a.ReadOnly, DestructiveHint: a.Destructive, IdempotentHint: a.Idempotent, OpenWorldHint: a.OpenWorld}
		}
		out.Tools = append(out.Tools, w)
	}
	return out, nil
}

func (e *Endpoint) allowed(tenant, intentType string) bool {
	return e.cfg.Allowed == nil || e.cfg.Allowed(tenant, intentType)
}

// errUnknownTool is the JSON-RPC error of a call to a tool that is not
// listed for the caller.
func errUnknownTool(name string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
}

// callTool serves tools/call: it publishes the intent (unless this call was
// seen before) and answers with its result, waiting up to the intent's
// deadline, or at once with a task when the client asked for one.
func (e *Endpoint) callTool(ctx context.Context, req *sdk.CallToolRequest) (sdk.Result, error) {
	p := req.Params
	tenant := tenantOf(req)
	t, ok := e.catalog().IntentType(p.Name)
	if !ok || !e.allowed(tenant, p.Name) {
		return nil, errUnknownTool(p.Name)
	}
	args := p.Arguments
	if len(bytes.TrimSpace(args)) == 0 || bytes.Equal(bytes.TrimSpace(args), []byte("null")) {
		args = json.RawMessage("{}")
	}
	if err := e.catalog().CheckPayload(p.Name, schemas.JSON(args)); err != nil {
		return invalidArguments(p.Name, err), nil
	}
	ci := callInfoOf(req.Extra.Header)
	session := req.Session.ID()
	now := e.cfg.Clock.Now()
	client := ""
	if info := req.ClientInfo(); info != nil {
		client = info.Name + "/" + info.Version
	}
	id, derived := intentIDFor(tenant, session, ci, client, p.Name, args)
	if !derived {
		id = intents.NewIDAt(now.UnixMilli())
	}
	ir := &schemas.IntentRequest{IntentID: id, IntentType: p.Name, Payload: schemas.JSON(args), CreatedAt: schemas.Ptr(now.UnixMilli())}
	if tenant != "" {
		ir.Tenant = &tenant
	}
	if s := session; s != "" {
		ir.SessionID = &s
	}
	if err := intents.Validate(ir); err != nil {
		return invalidArguments(p.Name, err), nil
	}
	defer e.startIntake(req, ir, now).end() // tracing.go
	res, wait, release := e.cfg.Results.Await(tenant, id)
	defer release()
	// Registered before publishing: a notifications/cancelled may follow
	// the publish at once.
	gone, remove := e.calls.add(tenant, session, ci.ID, id)
	defer remove()
	if res == nil {
		if ref, stored := e.admit(ctx, t, tenant, id); ref != nil {
			return overloaded(ref), nil
		} else if stored != nil {
			res = stored // a repeat of a resolved call: its result, nothing published
		}
	}
	task := e.wantsTask(req, ci)
	if res == nil && !task { // this call waits: it takes a slot, or is refused
		// It holds its arguments twice while it waits: the raw body, and
		// the parsed request.
		release, ref := e.cfg.WaitLimit.Acquire(tenantPtr(req), 2*int64(len(args)))
		if ref != nil {
			return overloaded(ref), nil
		}
		defer release()
	}
	if res == nil {
		if err := e.cfg.Publisher.PublishIntent(ctx, ir); err != nil {
			e.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "publish intent failed", slog.String("intent_id", id), slog.Any("error", err))
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the intent could not be published; retry the call"}
		}
		e.cfg.Results.Submitted(id, p.Name, tenant)
	}
	if task {
		return e.taskCreated(req, id, now, res), nil
	}
	if res != nil {
		return toolResult(res), nil
	}
	if tok := p.GetProgressToken(); tok != nil {
		stop := e.cfg.Progress.SubscribeProgress(tenant, id, func(pr Progress) {
			_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: pr.Progress, Total: pr.Total, Message: pr.Message})
		})
		defer stop()
	}
	return e.await(ctx, req, t, id, ci.ID, wait, gone)
}

// admit asks admission about a call before anything is published. A
// refusal it returns is counted; a repeat of a call whose intent has its
// result (the same tenant's) is not refused: stored is that result.
func (e *Endpoint) admit(ctx context.Context, t api.IntentTypeInfo, tenant, id string) (ref *api.Refusal, stored *schemas.IntentResult) {
	if ref = e.cfg.Admission.Check(t, true, nil); ref == nil {
		return nil, nil
	}
	if st, err := e.cfg.Lookup.Lookup(ctx, tenant, id); err == nil && st.Resolved() {
		return nil, st.Result
	}
	e.cfg.Admission.Refused(ref)
	return ref, nil
}

// overloaded is the tool error of a call admission or the wait limit
// refused: nothing was published, and the text says when to retry (clients
// show it to the model that called the tool), as _meta does for programs.
func overloaded(ref *api.Refusal) *sdk.CallToolResult {
	meta := sdk.Meta{"reason": ref.Reason, "retry_after_ms": ref.RetryAfter.Milliseconds()}
	if ref.Reason != api.ReasonWaiting {
		meta["backlog_ms"] = ref.Backlog().Milliseconds()
	}
	return &sdk.CallToolResult{IsError: true, Meta: meta, Content: []sdk.Content{&sdk.TextContent{Text: ref.Error()}}}
}

// authenticatedKey marks, in the TokenInfo's Extra, a caller whose
// credential the API's guard checked (endpoint.go).
const authenticatedKey = "switchboard.authenticated"

// tenantPtr is the caller's tenant for the wait limit's per-tenant bound:
// nil without a credential (authentication off), whose tenant means
// nothing.
func tenantPtr(req sdk.Request) *string {
	if x := req.GetExtra(); x != nil && x.TokenInfo != nil && x.TokenInfo.Extra[authenticatedKey] == true {
		t := x.TokenInfo.UserID
		return &t
	}
	return nil
}

// await waits for the intent's result: up to its deadline (the intent
// type's timeout from now) plus ResultGrace, until the call is cancelled,
// or until its client is gone for the answer (gone: its stream was cut at
// the write wait).
func (e *Endpoint) await(ctx context.Context, req *sdk.CallToolRequest, t api.IntentTypeInfo, id string, rpcID json.RawMessage, wait <-chan *schemas.IntentResult, gone <-chan struct{}) (sdk.Result, error) {
	limit := time.Duration(t.TimeoutMs)*time.Millisecond + e.cfg.ResultGrace
	deadline := e.cfg.Clock.NewTimer(limit)
	defer deadline.Stop()
	var poll <-chan time.Time
	if e.cfg.SSEPollAfter > 0 && req.Extra != nil && req.Extra.CloseSSEStream != nil {
		pt := e.cfg.Clock.NewTimer(e.cfg.SSEPollAfter)
		defer pt.Stop()
		poll = pt.Chan()
	}
	for {
		select {
		case res := <-wait:
			return toolResult(res), nil
		case <-poll:
			poll = nil
			req.Extra.CloseSSEStream(sdk.CloseSSEStreamArgs{RetryAfter: 100 * time.Millisecond})
		case <-deadline.Chan():
			return noResult(id, fmt.Sprintf(
				"no result for intent %s within %s; it may still resolve: look it up with GET /v1/intents/%s or call it as a task", id, limit, id)), nil
		case <-gone:
			return noResult(id, fmt.Sprintf(
				"the client did not read this call's stream within the write wait; intent %s goes on: look it up with GET /v1/intents/%s", id, id)), nil
		case <-e.stopped:
			return noResult(id, fmt.Sprintf(
				"the server is shutting down; intent %s goes on: look it up with GET /v1/intents/%s or on another instance", id, id)), nil
		case <-ctx.Done():
			if req.Session.ID() == "" {
				// Stateless (2026-07-28): the client closed the request,
				// which is how it cancels; nobody can collect the result.
				if _, first := e.calls.claimCancel(tenantOf(req), "", rpcID); first || len(rpcID) == 0 {
					e.cancel(tenantOf(req), id, "the MCP client closed the request")
				}
			}
			return nil, ctx.Err()
		}
	}
}

// noResult is the tool error of a call that stops waiting for its intent's
// result: text says why and where to look for it.
func noResult(id, text string) *sdk.CallToolResult {
	return &sdk.CallToolResult{
		IsError: true,
		Meta:    sdk.Meta{"intent_id": id},
		Content: []sdk.Content{&sdk.TextContent{Text: text}},
	}
}

// invalidArguments is the tool error of arguments that fail the input
// schema (or the intent's validation): nothing was published.
func invalidArguments(tool string, err error) *sdk.CallToolResult {
	msg := err.Error()
	var pe *payload.Error
	if errors.As(err, &pe) {
		msg = fmt.Sprintf("arguments at %s: %s", pathOrRoot(pe.Path), pe.Reason)
	}
	return &sdk.CallToolResult{
		IsError: true,
		Meta:    sdk.Meta{"outcome": "invalid_arguments"},
		Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("invalid arguments for %s: %s (input_schema)", tool, msg)}},
	}
}

func pathOrRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// toolResult maps an intent's result to a tool result:
//
//	answered                         the answer as structuredContent (when a JSON object) and as text
//	fallback_cache, fallback_static  the same, with _meta fallback: true
//	every other outcome              isError, the reason as text
//
// _meta always names the intent id and the outcome.
func toolResult(res *schemas.IntentResult) *sdk.CallToolResult {
	meta := sdk.Meta{"intent_id": res.IntentID, "outcome": string(res.Outcome)}
	switch res.Outcome {
	case schemas.OutcomeAnswered, schemas.OutcomeFallbackCache, schemas.OutcomeFallbackStatic:
		fallback := res.Outcome != schemas.OutcomeAnswered
		meta["fallback"] = fallback
		out := &sdk.CallToolResult{Meta: meta}
		text := "null"
		if res.Answer != nil {
			text = string(*res.Answer)
			var obj map[string]any
			if json.Unmarshal([]byte(text), &obj) == nil && obj != nil {
				out.StructuredContent = json.RawMessage(text)
			}
		}
		out.Content = []sdk.Content{&sdk.TextContent{Text: text}}
		return out
	}
	reason := string(res.Outcome)
	if res.Error != nil {
		reason += ": " + res.Error.Message
		if res.Error.Code != "" && res.Error.Code != string(res.Outcome) {
			reason += " (" + res.Error.Code + ")"
		}
		meta["error_code"] = res.Error.Code
	}
	return &sdk.CallToolResult{IsError: true, Meta: meta, Content: []sdk.Content{&sdk.TextContent{Text: reason}}}
}

// cancelRecord is the cancel of DELETE /v1/intents/{id}, for the caller's
// tenant.
func cancelRecord(tenant, intentID, reason string) intents.Cancel {
	return intents.Cancel{IntentID: intentID, Reason: reason, Tenant: tenant}
}

// completeResult is a tool result tagged resultType "complete", as
// 2026-07-28 wants every result (the SDK tags the results of its own tool
// handlers; tools/call is served here).
type completeResult struct {
	sdk.ResultBase
	inner *sdk.CallToolResult
}

func (c *completeResult) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(c.inner)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["resultType"] = json.RawMessage(`"complete"`)
	if len(c.Meta) > 0 { // what the SDK added (serverInfo)
		meta := map[string]any{}
		for k, v := range c.inner.Meta {
			meta[k] = v
		}
		for k, v := range c.Meta {
			meta[k] = v
		}
		if m["_meta"], err = json.Marshal(meta); err != nil {
			return nil, err
		}
	}
	return json.Marshal(m)
}
