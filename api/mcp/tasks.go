package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// Tasks. A task is an intent: its id is the intent id, its state is read
// through [api.IntentLookup], and cancelling it writes the intent's cancel
// record. Two wire forms are served:
//
//   - 2026-07-28, the io.modelcontextprotocol/tasks extension: a client that
//     declares the extension in its request's capabilities gets every
//     tools/call answered at once with {"resultType":"task", taskId,
//     status, ...}; tasks/get returns the task with its result (or error)
//     once terminal; tasks/cancel; tasks/update is refused (no intent asks
//     for input).
//   - 2025-11-25, experimental: a tools/call with params.task returns
//     {"task":{...}} at once; tasks/get, tasks/result (waits for the
//     result), tasks/cancel and tasks/list (the tenant's recent intents;
//     without a token, with authentication off, every tenant's: every task
//     is visible then, as tasks/get finds any tenant's).

const (
	tasksExtension = "io.modelcontextprotocol/tasks"
	relatedTask    = "io.modelcontextprotocol/related-task"
)

// taskParamsIn are the params of tasks/get, tasks/result, tasks/cancel and
// tasks/update.
type taskParamsIn struct {
	sdk.ParamsBase
	TaskID string `json:"taskId"`
}

// listParamsIn are the params of tasks/list.
type listParamsIn struct {
	sdk.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// taskWire is a task as both revisions write it (2026-07-28 names the
// durations ttlMs and pollIntervalMs, 2025-11-25 ttl and pollInterval).
type taskWire struct {
	TaskID         string              `json:"taskId"`
	Status         string              `json:"status"`
	StatusMessage  string              `json:"statusMessage,omitempty"`
	CreatedAt      string              `json:"createdAt"`
	LastUpdatedAt  string              `json:"lastUpdatedAt"`
	TTL            *int64              `json:"ttl,omitempty"`
	PollInterval   *int64              `json:"pollInterval,omitempty"`
	TTLMs          *int64              `json:"ttlMs,omitempty"`
	PollIntervalMs *int64              `json:"pollIntervalMs,omitempty"`
	Result         *sdk.CallToolResult `json:"result,omitempty"`
	Error          *jsonrpc.Error      `json:"error,omitempty"`
}

// taskResult is tasks/get's, tasks/cancel's and (2026) tools/call's answer.
type taskResult struct {
	sdk.ResultBase
	ResultType string `json:"resultType,omitempty"`
	taskWire
}

// createTaskResult is a task-augmented tools/call's answer (2025-11-25).
type createTaskResult struct {
	sdk.ResultBase
	Task taskWire `json:"task"`
}

type taskList struct {
	sdk.ResultBase
	Tasks      []taskWire `json:"tasks"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

// maxListedTasks is how many of a tenant's recent intents tasks/list
// returns (one page).
const maxListedTasks = 100

func (e *Endpoint) addTaskMethods() error {
	never := func(context.Context, *sdk.ServerSession, *taskParamsIn) (*taskResult, error) {
		return nil, fmt.Errorf("mcp: tasks are served by the middleware")
	}
	for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel", "tasks/update"} {
		if err := sdk.AddReceivingCustomMethod(e.server, m, never); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalidConfig, m, err)
		}
	}
	return sdk.AddReceivingCustomMethod(e.server, "tasks/list", func(context.Context, *sdk.ServerSession, *listParamsIn) (*taskList, error) {
		return nil, fmt.Errorf("mcp: tasks are served by the middleware")
	})
}

// taskMiddleware serves tasks/*.
func (e *Endpoint) taskMethod(ctx context.Context, method string, req sdk.Request) (sdk.Result, bool, error) {
	tenant := tenantOf(req)
	if method == "tasks/list" {
		r, ok := req.(*sdk.ServerRequest[*listParamsIn])
		// Params may be absent (a legacy client: 2026-07-28 requests
		// always carry _meta), and ProtocolVersion reads them.
		if !ok || (r.Params != nil && modern(r.ProtocolVersion())) {
			return nil, true, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "tasks/list is not part of the tasks extension of 2026-07-28"}
		}
		out := &taskList{Tasks: []taskWire{}}
		recent, _, err := e.cfg.Lookup.Recent(ctx, lookupTenant(tenant), maxListedTasks, "")
		if err != nil {
			return nil, true, lookupError(err, "")
		}
		for _, st := range recent {
			out.Tasks = append(out.Tasks, e.task(st, false))
		}
		return out, true, nil
	}
	r, ok := req.(*sdk.ServerRequest[*taskParamsIn])
	if !ok {
		return nil, false, nil
	}
	if r.Params == nil {
		return nil, true, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: method + " needs params {\"taskId\": ...}"}
	}
	v2026 := modern(r.ProtocolVersion())
	if method == "tasks/update" {
		return nil, true, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no Switchboard task asks for input: tasks/update has nothing to update"}
	}
	if method == "tasks/result" && v2026 {
		return nil, true, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "tasks/result is not part of the tasks extension of 2026-07-28: tasks/get returns the result"}
	}
	id := r.Params.TaskID
	st, err := e.cfg.Lookup.Lookup(ctx, lookupTenant(tenant), id)
	if err != nil {
		return nil, true, lookupError(err, id)
	}
	switch method {
	case "tasks/get":
		return &taskResult{taskWire: e.task(st, v2026)}, true, nil
	case "tasks/cancel":
		if st.Resolved() {
			return nil, true, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("task %q is already %s", id, statusOf(st.Result))}
		}
		e.cancel(tenant, id, "the MCP client cancelled the task")
		tw := e.task(st, v2026)
		tw.StatusMessage = "cancellation requested: the intent resolves cancelled unless its answer is already on its way"
		return &taskResult{taskWire: tw}, true, nil
	case "tasks/result":
		res := st.Result
		if res == nil { // this call waits: it takes a slot, or is refused
			release, ref := e.cfg.WaitLimit.Acquire(tenantPtr(req), 0)
			if ref != nil {
				return nil, true, waitingError(ref, id)
			}
			defer release()
			var err error
			if res, err = e.waitResult(ctx, st); err != nil {
				return nil, true, err
			}
		}
		out := toolResult(res)
		out.Meta[relatedTask] = map[string]string{"taskId": id}
		return out, true, nil
	}
	return nil, false, nil
}

// waitResult waits for a pending intent's result, up to its intent type's
// timeout plus ResultGrace from now (then a JSON-RPC error, reason
// "no_result"), until the endpoint shuts down (reason "shutting_down"), or
// until ctx ends (ctx's error). It never returns a nil result with a nil
// error. st is the intent as a lookup found it (its tenant the intent's
// own).
func (e *Endpoint) waitResult(ctx context.Context, st api.IntentStatus) (*schemas.IntentResult, error) {
	res, wait, release := e.cfg.Results.Await(st.Tenant, st.IntentID)
	defer release()
	if res != nil {
		return res, nil
	}
	limit := e.cfg.ResultGrace
	if t, ok := e.catalog().IntentType(st.IntentType()); ok {
		limit += time.Duration(t.TimeoutMs) * time.Millisecond
	}
	timer := e.cfg.Clock.NewTimer(limit)
	defer timer.Stop()
	id := st.IntentID
	select {
	case res := <-wait:
		return res, nil
	case <-e.stopped:
		return nil, taskError("shutting_down", fmt.Sprintf(
			"the server is shutting down; task %q goes on: poll it with tasks/get, or retry tasks/result, in a session on another instance", id))
	case <-timer.Chan():
		if st, err := e.cfg.Lookup.Lookup(ctx, st.Tenant, id); err == nil && st.Result != nil {
			return st.Result, nil
		}
		return nil, taskError("no_result", fmt.Sprintf(
			"no result for task %q within %s; it may still resolve: poll it with tasks/get or retry tasks/result", id, limit))
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// taskError is the JSON-RPC error of a tasks/result that ends without the
// task's result, the task going on: code -32000, data {"reason": reason}.
func taskError(reason, message string) error {
	data, _ := json.Marshal(map[string]string{"reason": reason})
	return &jsonrpc.Error{Code: codeOverloaded, Message: message, Data: data}
}

// codeOverloaded is the JSON-RPC error code of a tasks/result the wait
// limit refused, or that ended without a result (in the range JSON-RPC
// leaves to servers); its data names the reason (and when to retry).
const codeOverloaded = -32000

// waitingError is the JSON-RPC error of a tasks/result refused by the wait
// limit: the task goes on, and tasks/get or a later tasks/result fetches
// its result. It names the caller's tenant's bound or the instance's, never
// anything of another tenant's.
func waitingError(ref *api.Refusal, id string) error {
	data, _ := json.Marshal(map[string]any{"reason": ref.Reason, "retry_after_ms": ref.RetryAfter.Milliseconds()})
	return &jsonrpc.Error{Code: codeOverloaded, Data: data, Message: fmt.Sprintf(
		"overloaded (%s): %s; task %q goes on: poll it with tasks/get, or retry tasks/result in %s",
		ref.Reason, ref.WaitingBound(), id, ref.RetryAfter)}
}

func modern(version string) bool { return version >= protocol2026 }

// wantsTask: 2025-11-25 asks with params.task; 2026-07-28 lets the server
// decide for a client that declares the extension, and Switchboard then
// always answers with a task (an intent is durable, and any instance
// answers tasks/get).
func (e *Endpoint) wantsTask(req *sdk.CallToolRequest, ci callInfo) bool {
	if modern(req.ProtocolVersion()) {
		caps := req.ClientCapabilities()
		if caps == nil || caps.Extensions == nil {
			return false
		}
		_, ok := caps.Extensions[tasksExtension]
		return ok
	}
	return ci.Task != nil
}

// taskCreated answers a task-augmented tools/call.
func (e *Endpoint) taskCreated(req *sdk.CallToolRequest, id string, now time.Time, res *schemas.IntentResult) sdk.Result {
	st := api.IntentStatus{
		IntentID: id, Tenant: tenantOf(req), Result: res,
		Pending: &api.PendingState{State: api.PendingReceived, IntentType: req.Params.Name, ReceivedAt: now.UnixMilli()},
	}
	if modern(req.ProtocolVersion()) {
		tw := e.task(st, true)
		tw.Result, tw.Error = nil, nil // CreateTaskResult carries no result
		return &taskResult{ResultType: "task", taskWire: tw}
	}
	return &createTaskResult{Task: e.task(st, false)}
}

// task describes an intent as a task.
func (e *Endpoint) task(st api.IntentStatus, v2026 bool) taskWire {
	now := e.cfg.Clock.Now()
	created := now
	if at := st.ReceivedAt(); at > 0 {
		created = time.UnixMilli(at)
	}
	updated := now
	tw := taskWire{TaskID: st.IntentID, Status: "working"}
	if st.Result != nil {
		tw.Status = statusOf(st.Result)
		updated = time.UnixMilli(st.Result.Timeline.ResolvedAt)
		if tw.Status != "completed" {
			tw.StatusMessage = string(st.Result.Outcome)
			if st.Result.Error != nil {
				tw.StatusMessage += ": " + st.Result.Error.Message
			}
		}
		if v2026 {
			tw.Result = toolResult(st.Result)
		}
	} else if st.Timeout != nil {
		tw.StatusMessage = fmt.Sprintf("timed out (%s); resolving with its fallback", st.Timeout.Reason)
	}
	tw.CreatedAt, tw.LastUpdatedAt = created.UTC().Format(time.RFC3339Nano), updated.UTC().Format(time.RFC3339Nano)
	ttl, poll := e.cfg.TaskTTL.Milliseconds(), DefaultPollInterval.Milliseconds()
	if v2026 {
		tw.TTLMs, tw.PollIntervalMs = &ttl, &poll
	} else {
		tw.TTL, tw.PollInterval = &ttl, &poll
	}
	return tw
}

// statusOf is a resolved intent's task status: completed for an answer
// (fallbacks included), cancelled, or failed.
func statusOf(res *schemas.IntentResult) string {
	switch res.Outcome {
	case schemas.OutcomeAnswered, schemas.OutcomeFallbackCache, schemas.OutcomeFallbackStatic:
		return "completed"
	case schemas.OutcomeCancelled:
		return "cancelled"
	}
	return "failed"
}

// lookupTenant is the api.IntentLookup tenant of an MCP caller's: its
// token's user, or every tenant's (api.AnyTenant) without a token
// (authentication off).
func lookupTenant(tenant string) string {
	if tenant == "" {
		return api.AnyTenant
	}
	return tenant
}

// lookupError is the JSON-RPC error of a failed task lookup (id "" for
// tasks/list): an unknown task (another tenant's included), one this
// instance cannot tell yet (its store is catching up with Kafka), or a
// store that failed.
func lookupError(err error, id string) error {
	switch {
	case errors.Is(err, api.ErrIntentNotFound):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown task %q", id)}
	case errors.Is(err, api.ErrLookupCatchingUp):
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "this instance is still reading the results topic since its start; retry"}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task could not be looked up; retry"}
}
