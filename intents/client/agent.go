package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
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

// AgentConfig says which topics an agent serves and answers on.
type AgentConfig struct {
	Name           string
	Topic          string // default mcp.agent.<name>.request
	ResponsesTopic string // default mcp.agent.response
	GroupID        string // default switchboard-agent-<name>
	Kafka          kafkaio.Settings
	Codec          *schemas.Codec
	Concurrency    int // intents served at once; default 64
	// CommitInterval is how often the agent commits the requests it has
	// answered; default 1 s. It also commits when the group takes a
	// partition away and when it stops.
	CommitInterval time.Duration
	Clock          clockwork.Clock
	Logger         *slog.Logger
	// TracerProvider traces each request served (tracing.go): a span
	// continuing the router's dispatch span, and its traceparent on the
	// response. Nil: no spans; the response carries the request's
	// traceparent.
	TracerProvider trace.TracerProvider
}

// Agent consumes its topic and answers each request on the responses topic.
//
// Delivery to the agent is at least once: a request's offset is committed
// only once the broker has acknowledged its answer (or once no answer is
// due: ErrNoAnswer, a cancelled intent, an undecodable record), per
// partition up to the first request not yet answered (kafkaio.GroupReader).
// An agent killed mid-work leaves what it had read and not answered
// uncommitted, and whoever serves the topic next reads it again. Answers may
// so repeat after a crash (requests answered behind one that was not are
// served again); the router pairs the first answer of an intent and ignores
// the others.
//
// Intents are (tenant, intent_id): two tenants may use one id. The agent
// echoes each request's tenant in its response (AgentResponse.tenant, ""
// for a request without one), so that the router credits the answer to the
// right tenant's intent. A cancel notice on the topic (header
// switchboard.control=cancel, see intents.Cancel) cancels the context of the
// handler serving the intent of the tenant and id it names, with a cause
// wrapping ErrCancelled, and no response is sent for it whatever the
// handler returns. A cancel for an intent not in hand is ignored. The agent
// holds up to Concurrency intents being served and as many waiting for a
// slot; past that it stops reading its topic (and so reads no cancel
// notice) until a slot frees. A slot frees once the handler's response is
// handed to the producer: acknowledgements are pipelined, and Run waits for
// them (up to 5 s) before it returns.
type Agent struct {
	cfg    AgentConfig
	h      Handler
	p      *kafkaio.Producer
	tracer trace.Tracer // nil: no spans

	mu     sync.Mutex
	inHand map[string]map[*call]struct{} // by intents.Scoped(tenant, intent id)
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
	p, err := kafkaio.NewAnswerProducer(cfg.Kafka)
	if err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, h: h, p: p, inHand: map[string]map[*call]struct{}{}}
	if cfg.TracerProvider != nil {
		a.tracer = cfg.TracerProvider.Tracer("github.com/switchboard-mcp/switchboard/intents/client")
	}
	return a, nil
}

// Run serves until ctx ends, then stops: it cancels the handlers in hand,
// waits for them and for the acknowledgements of the answers sent, commits
// what is answered and leaves the group. The stop is bounded (stopTimeout
// on the agent's clock): with the broker gone, Run gives up waiting and
// returns ErrStopAbandoned rather than hang, and what it had not committed
// is read again by whoever serves the topic next.
func (a *Agent) Run(ctx context.Context) error {
	r, err := kafkaio.NewGroupReader(a.cfg.Kafka, a.cfg.GroupID, []string{a.cfg.Topic}, kafkaio.GroupReaderOptions{
		CommitInterval: a.cfg.CommitInterval, Clock: a.cfg.Clock,
		OnCommitError: func(err error) { a.cfg.Logger.Warn("agent: committing", "agent", a.cfg.Name, "error", err) },
	})
	if err != nil {
		a.p.Close(0)
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	slots := make(chan struct{}, a.cfg.Concurrency)   // intents being served
	waiting := make(chan struct{}, a.cfg.Concurrency) // intents waiting for a slot
	var readErr error
	readDone := make(chan struct{}) // closed once Read has returned: the reader is the stop's alone
	go func() {
		defer close(readDone)
		readErr = r.Read(ctx, func(rec *port.Record, done func()) error {
			a.take(ctx, rec, done, &wg, slots, waiting)
			return nil
		})
	}()
	var runErr error
	select {
	case <-readDone:
		runErr = readErr // a fatal error of the client
	case <-ctx.Done():
	}
	cancel() // the handlers in hand stop; their requests stay uncommitted
	stopped := make(chan error, 1)
	go func() {
		<-readDone
		wg.Wait()
		a.p.Close(5 * time.Second) // the answers' acknowledgements mark their requests done
		stopped <- r.Close()       // commits what is done, leaves the group
	}()
	select {
	case err := <-stopped:
		if err != nil && runErr == nil {
			runErr = fmt.Errorf("client: agent %s: leaving the group: %w", a.cfg.Name, err)
		}
	case <-a.cfg.Clock.After(stopTimeout):
		return fmt.Errorf("%w (agent %s, after %s)", ErrStopAbandoned, a.cfg.Name, stopTimeout)
	}
	return runErr
}

// stopTimeout bounds Run's stop: the handlers' return, the answers'
// acknowledgements, the last commit and leaving the group.
const stopTimeout = 20 * time.Second

// take hands one record of the agent's topic to its handling. done marks
// the record finished for the commit: a control record or an undecodable
// one at once, a request once its answer is acknowledged (serve), or once
// it is known that no answer is due (cancelled, ErrNoAnswer). A request
// whose handler the agent's stop interrupted is never done: it is read again
// after a restart.
func (a *Agent) take(ctx context.Context, rec *port.Record, done func(), wg *sync.WaitGroup, slots, waiting chan struct{}) {
	if kind, ok := rec.Header(intents.HeaderControl); ok {
		a.control(string(kind), rec)
		done()
		return
	}
	var req schemas.AgentRequest
	if err := a.cfg.Codec.Decode(rec.Value, &req); err != nil {
		a.cfg.Logger.Warn("agent: undecodable request skipped", "agent", a.cfg.Name, "offset", rec.Offset, "error", err)
		done()
		return
	}
	select {
	case waiting <- struct{}{}:
	case <-ctx.Done():
		return
	}
	callCtx, cancel := context.WithCancelCause(ctx)
	key := intents.Scoped(intents.TenantOf(req.Tenant), req.IntentID)
	c := a.track(key, cancel)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer a.untrack(key, c)
		select {
		case slots <- struct{}{}:
			<-waiting
		case <-callCtx.Done(): // cancelled, or the agent stops, while waiting
			<-waiting
			if ctx.Err() == nil { // cancelled: no answer is due
				done()
			}
			return
		}
		defer func() { <-slots }()
		if callCtx.Err() != nil { // cancelled as the slot came free
			if ctx.Err() == nil {
				done()
			}
			return
		}
		a.serve(ctx, callCtx, &req, done)
	}()
}

// control handles a control record: a cancel notice cancels the intent's
// calls in hand; other kinds are not for agents.
func (a *Agent) control(kind string, rec *port.Record) {
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
	key := intents.Scoped(c.Tenant, c.IntentID)
	a.mu.Lock()
	n := len(a.inHand[key])
	for x := range a.inHand[key] {
		x.cancel(cause)
	}
	a.mu.Unlock()
	if n > 0 {
		a.cfg.Logger.Info("agent: intent cancelled", "agent", a.cfg.Name, "intent_id", c.IntentID, "tenant", c.Tenant, "reason", c.Reason)
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

// serve runs the handler and sends its response, unless ctx ended
// meanwhile: the agent is stopping (runCtx), or the intent was cancelled.
// done runs once the request needs nothing more (serve's doc in take).
func (a *Agent) serve(runCtx, ctx context.Context, req *schemas.AgentRequest, done func()) {
	hctx, span := a.startHandling(ctx, req) // tracing.go
	hctx, rep := a.withReporter(hctx, req)
	answer, err := a.h(hctx, req)
	rep.finish() // no progress after the answer (progress.go)
	span.end(err)
	if runCtx.Err() != nil { // stopping: the request is read again after a restart
		return
	}
	if ctx.Err() != nil || errors.Is(err, ErrNoAnswer) {
		done()
		return
	}
	now := a.cfg.Clock.Now().UnixMilli()
	resp := &schemas.AgentResponse{
		RequestID: req.IntentID, Agent: a.cfg.Name, Status: schemas.StatusOK, ProducedAt: &now, Attempt: &req.Attempt,
		Tenant: schemas.Ptr(intents.TenantOf(req.Tenant)),
	}
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
	// 64 ÷ the ack time per second). Run's stop waits for them (Close), and
	// the acknowledgement is what marks the request done for the commit.
	value, err := a.cfg.Codec.Encode(a.cfg.ResponsesTopic, resp)
	if err != nil { // an answer this codec cannot write never will be: nothing to read again for
		a.cfg.Logger.Warn("agent: answering", "agent", a.cfg.Name, "intent_id", req.IntentID, "trace_id", traceID(req), "error", err)
		done()
		return
	}
	id, tid, deadline := req.IntentID, traceID(req), req.Deadline
	err = a.p.SendAsync(a.cfg.ResponsesTopic, []byte(id), value, span.headers(), time.Time{}, func(err error) {
		if err == nil {
			done()
			return
		}
		a.cfg.Logger.Warn("agent: answering", "agent", a.cfg.Name, "intent_id", id, "trace_id", tid, "error", err)
		a.undelivered(deadline, done)
	})
	if err != nil {
		a.cfg.Logger.Warn("agent: answering", "agent", a.cfg.Name, "intent_id", req.IntentID, "trace_id", traceID(req), "error", err)
		a.undelivered(deadline, done)
	}
}

// undelivered decides for an answer the producer could not deliver (after
// librdkafka's own retries, message.timeout.ms): once the request's deadline
// (unix ms) has passed, Switchboard has resolved the intent without it and
// reading the request again gains nothing, so it is done; before, it is not,
// and holds its partition's commits: the request is read and served again
// after a restart or a rebalance.
func (a *Agent) undelivered(deadline int64, done func()) {
	if deadline > 0 && a.cfg.Clock.Now().UnixMilli() >= deadline {
		done()
	}
}
