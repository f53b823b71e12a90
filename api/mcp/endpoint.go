package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/api"
)

// Defaults of [Config].
const (
	DefaultMaxBodyBytes   = 1 << 20
	DefaultResultGrace    = 15 * time.Second
	DefaultSessionTimeout = 30 * time.Minute
	DefaultTaskTTL        = 10 * time.Minute
	DefaultPollInterval   = time.Second
	// DefaultEventStoreBytes bounds the SSE events kept for resumption
	// (2025-11-25 sessions), across all sessions.
	DefaultEventStoreBytes = 16 << 20
)

// protocol2026 is the first revision served statelessly.
const protocol2026 = "2026-07-28"

// Config is what the endpoint needs: the catalog of intent types, where to
// publish, where results arrive, and optional knobs.
type Config struct {
	// Catalog lists the intent types: each is a tool. SetCatalog replaces
	// it.
	Catalog api.Catalog
	// Publisher publishes intents and cancel records (the API's).
	Publisher api.Publisher
	// Results is where this instance's results arrive: tools/call waits
	// on it.
	Results *api.Results
	// Lookup answers tasks/get, tasks/result and tasks/list. Default:
	// Results (this instance's memory only); serve and dev pass
	// api.NewIntentLookup (memory, then the lookup store of every
	// intent), so any instance answers for any task.
	Lookup api.IntentLookup
	// Progress delivers agents' progress. Default: none arrives.
	Progress ProgressSource
	// Allowed, if set, says whether a tenant may use an intent type (the
	// tool is then neither listed nor callable for it). Default: every
	// tenant may use every type.
	Allowed func(tenant, intentType string) bool

	// MaxBodyBytes caps one HTTP request's body (413 past it). Default
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// ResultGrace is how long past an intent's deadline a call waits for
	// its result (the router may hold a timed-out intent until the agent's
	// responses are read past the deadline, up to 10 s). Default
	// DefaultResultGrace.
	ResultGrace time.Duration
	// SessionTimeout closes sessions idle this long. Default
	// DefaultSessionTimeout.
	SessionTimeout time.Duration
	// SSEPollAfter, when set, closes a 2025-11-25 session's response
	// stream once a call has waited this long, asking the client to poll
	// (reconnect with Last-Event-ID, SEP-1699): proxies that cut long idle
	// responses then cut nothing. Zero: never.
	SSEPollAfter time.Duration
	// TaskTTL is the ttl tasks report (how long their result is kept is
	// the results memory's, or the lookup store's). Default DefaultTaskTTL.
	TaskTTL time.Duration

	// Admission, when set, refuses a tools/call before publishing its
	// intent when the backlog says it would most likely expire unread: a
	// tool error result (isError) saying so and when to retry. Nil: every
	// call is published.
	Admission *api.Admission

	// WaitLimit, when set, bounds the tools/call that wait for their
	// result (a task-augmented call does not wait) and the tasks/result
	// that wait for a task's: one more call over its bounds is refused
	// before publishing, a tool error like admission's with reason
	// "waiting"; one more tasks/result, a JSON-RPC error (code -32000,
	// data {"reason":"waiting"}) while its task goes on. Share the HTTP
	// API's ([api.WithWaitLimit]). Nil: no bound.
	WaitLimit *api.WaitLimit

	// SessionLimit, when set, bounds the sessions open on this instance,
	// in all and by tenant: one more initialize over its bounds is
	// answered 503 with a JSON-RPC error (code -32000, data reason
	// "mcp_sessions") and opens none (sessions.go). Nil: no bound.
	SessionLimit *api.SessionLimit

	// TracerProvider, when set, traces each tools/call that publishes an
	// intent with a switchboard.intake span (tracing.go), as the HTTP API
	// does. Nil: no spans (the caller's traceparent still travels on).
	TracerProvider trace.TracerProvider

	Clock   clockwork.Clock
	Logger  *slog.Logger
	Version string // the server's version in serverInfo
}

// Endpoint serves /mcp. Create it with [New] and mount it with
// [api.WithMCP]. It is safe for concurrent use.
type Endpoint struct {
	cfg       Config
	stateless http.Handler
	sessions  http.Handler
	server    *sdk.Server
	calls     *callRegistry
	versions  *sessionVersions
	tools     atomic.Pointer[api.Catalog] // the intent types in force (catalog.go)
	tracer    trace.Tracer                // nil: no spans (tracing.go)

	open openSessions // sessions holding a slot of SessionLimit (sessions.go)

	stopOnce sync.Once
	stopped  chan struct{} // closed by Shutdown: waiting calls end
	posts    inflight      // POSTs being served (a call answers within its POST)
}

// Shutdown ends the endpoint: calls waiting for a result answer at once
// (their intents go on; the answer names the intent id), and every session
// is closed, ending its streams. Call it before the HTTP server's
// Shutdown, which waits for in-flight requests ([api.Server.Shutdown] does,
// for a handler mounted with [api.WithMCP]). It is idempotent.
func (e *Endpoint) Shutdown(ctx context.Context) error {
	e.stopOnce.Do(func() { close(e.stopped) })
	e.posts.wait(ctx) // the woken calls answer before their sessions close
	for ss := range e.server.Sessions() {
		_ = ss.Close()
	}
	return nil
}

// New builds the endpoint. It starts no goroutine.
func New(cfg Config) (*Endpoint, error) {
	if cfg.Publisher == nil || cfg.Results == nil {
		return nil, fmt.Errorf("%w: a Publisher and Results are required", ErrInvalidConfig)
	}
	if cfg.Lookup == nil {
		cfg.Lookup = cfg.Results
	}
	if cfg.Progress == nil {
		cfg.Progress = noProgress{}
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.ResultGrace <= 0 {
		cfg.ResultGrace = DefaultResultGrace
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	if cfg.TaskTTL <= 0 {
		cfg.TaskTTL = DefaultTaskTTL
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	e := &Endpoint{cfg: cfg, calls: newCallRegistry(), versions: newSessionVersions(), stopped: make(chan struct{})}
	e.open.release = map[string]func(){}
	e.tools.Store(&cfg.Catalog)
	if cfg.TracerProvider != nil {
		e.tracer = cfg.TracerProvider.Tracer("github.com/switchboard-mcp/switchboard/api/mcp")
	}
	e.server = sdk.NewServer(&sdk.Implementation{Name: "switchboard", Title: "Switchboard", Version: cfg.Version}, &sdk.ServerOptions{
		Logger:       cfg.Logger,
		Instructions: "Each tool is a Switchboard intent type: a call publishes an intent to Kafka and answers with its result. Long calls can be tasks (the task id is the intent id).",
		Capabilities: &sdk.ServerCapabilities{
			Tools:      &sdk.ToolCapabilities{ListChanged: true}, // SetCatalog
			Extensions: map[string]any{tasksExtension: map[string]any{}},
		},
	})
	e.server.AddReceivingMiddleware(e.middleware)
	if err := e.addTaskMethods(); err != nil {
		return nil, err
	}
	verify := func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		tenant, ok := api.TenantFrom(r.Context())
		return &auth.TokenInfo{UserID: tenant, Extra: map[string]any{authenticatedKey: ok}}, nil
	}
	bind := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	getServer := func(*http.Request) *sdk.Server { return e.server }
	e.stateless = bind(sdk.NewStreamableHTTPHandler(getServer, &sdk.StreamableHTTPOptions{
		Stateless: true, Logger: cfg.Logger, MaxRequestBodyBytes: cfg.MaxBodyBytes, PropagateRequestCancellation: true,
	}))
	e.sessions = bind(sdk.NewStreamableHTTPHandler(getServer, &sdk.StreamableHTTPOptions{
		Logger: cfg.Logger, MaxRequestBodyBytes: cfg.MaxBodyBytes, SessionTimeout: cfg.SessionTimeout,
		EventStore: closingEventStore{EventStore: boundedEventStore(), closed: e.sessionClosed},
	}))
	return e, nil
}

func boundedEventStore() sdk.EventStore {
	s := sdk.NewMemoryEventStore(nil)
	s.SetMaxBytes(DefaultEventStoreBytes)
	return s
}

// ServeHTTP serves /mcp: a request of revision 2026-07-28 (by its
// Mcp-Protocol-Version header or its _meta) goes to the stateless handler,
// anything else to the session handler (initialize, Mcp-Session-Id, GET
// streams, DELETE). The tenant the API's guard established is bound to the
// session, so another tenant's session id is refused (403).
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Header.Del(callHeader)
	tenant, _ := api.TenantFrom(r.Context())
	// The SDK binds a session to the bearer token's user: ours is the
	// tenant the guard found (from a JWT, or an API key in any header).
	r.Header.Set("Authorization", "Bearer switchboard")
	newProtocol := r.Header.Get("Mcp-Protocol-Version") >= protocol2026
	var (
		msgs       []wireMsg
		initialize bool
	)
	if r.Method == http.MethodPost {
		e.posts.add()
		defer e.posts.done()
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, e.cfg.MaxBodyBytes))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "cannot read the request body", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		msgs, initialize = peek(body), hasInitialize(body)
		for _, m := range msgs {
			if m.Method == "server/discover" || m.protocol() >= protocol2026 {
				newProtocol = true
			}
		}
		e.notice(tenant, r.Header.Get("Mcp-Session-Id"), msgs, newProtocol)
		if ci, ok := oneCall(msgs); ok {
			r.Header.Set(callHeader, encodeCallInfo(ci))
		}
		if v := initializeVersion(msgs); v != "" && !newProtocol {
			w = &sessionCapture{ResponseWriter: w, version: v, versions: e.versions}
		}
	}
	sid := r.Header.Get("Mcp-Session-Id")
	if r.Method == http.MethodPost && !newProtocol && sid == "" && initialize {
		// A new session: it takes a slot, given back when the SDK closes
		// the session (closingEventStore), or else when it no longer
		// holds it (pruneSessions).
		release := e.admitSession(w, tenantSlot(r), msgs)
		if release == nil {
			return
		}
		sc, ok := w.(*sessionCapture)
		if !ok {
			sc = &sessionCapture{ResponseWriter: w}
			w = sc
		}
		sc.opened = func(sid string) { e.sessionOpened(sid, release) }
		defer func() {
			if !sc.recorded {
				release() // no session was opened
			}
		}()
	}
	if r.Method == http.MethodDelete && sid != "" {
		defer e.pruneSessions(true)
	}
	// A session's requests are served at the revision negotiated when it
	// began, whatever (older) version header a client sends later: the
	// SDK chooses per request whether to write SSE priming events.
	if sid != "" {
		if v := e.versions.get(sid); v != "" {
			r.Header.Set("Mcp-Protocol-Version", v)
		}
		if r.Method == http.MethodDelete {
			e.versions.forget(sid)
		}
	}
	if newProtocol && r.Header.Get("Mcp-Session-Id") == "" {
		e.stateless.ServeHTTP(w, r)
		return
	}
	e.sessions.ServeHTTP(w, r)
	// A client that did not take a write of the call's stream within the
	// write wait (the API bounds /mcp's writes) is gone for its answer:
	// the call stops waiting and gives its slot back (a stateless call's
	// context ends with the request).
	if ci, ok := oneCall(msgs); ok && api.WriteTimedOut(w) {
		e.calls.abandon(tenant, sid, ci.ID)
	}
}

// wireMsg is the part of a JSON-RPC message the endpoint reads before the
// SDK does.
type wireMsg struct {
	ID        json.RawMessage `json:"id"`
	Method    string          `json:"method"`
	rawParams json.RawMessage
	Params    struct {
		Name      string                     `json:"name"`
		Task      *taskParams                `json:"task"`
		RequestID json.RawMessage            `json:"requestId"`
		Reason    string                     `json:"reason"`
		Meta      map[string]json.RawMessage `json:"_meta"`
	} `json:"params"`
}

// UnmarshalJSON keeps the raw params beside the parsed ones.
func (m *wireMsg) UnmarshalJSON(b []byte) error {
	type plain wireMsg
	var raw struct {
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(b, (*plain)(m)); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	m.rawParams = raw.Params
	return nil
}

func (m wireMsg) protocol() string {
	var v string
	_ = json.Unmarshal(m.Params.Meta["io.modelcontextprotocol/protocolVersion"], &v)
	return v
}

// peek reads a body as one message or a batch; anything unreadable is left
// for the SDK to answer (a parse error).
func peek(body []byte) []wireMsg {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil
	}
	if body[0] == '[' {
		var ms []wireMsg
		if json.Unmarshal(body, &ms) != nil {
			return nil
		}
		return ms
	}
	var m wireMsg
	if json.Unmarshal(body, &m) != nil {
		return nil
	}
	return []wireMsg{m}
}

// oneCall returns the call info of the body's tools/call when it holds
// exactly one.
func oneCall(msgs []wireMsg) (callInfo, bool) {
	var ci callInfo
	n := 0
	for _, m := range msgs {
		if m.Method == "tools/call" && len(m.ID) > 0 {
			n++
			ci = callInfo{ID: m.ID, Task: m.Params.Task}
		}
	}
	return ci, n == 1
}

// notice acts on notifications/cancelled: the cancelled call's intent gets
// the same cancel record as DELETE /v1/intents/{id}. (The SDK cancels the
// call's context too, when the call runs in this session.)
func (e *Endpoint) notice(tenant, session string, msgs []wireMsg, stateless bool) {
	for _, m := range msgs {
		if m.Method != "notifications/cancelled" || len(m.Params.RequestID) == 0 {
			continue
		}
		if stateless {
			session = ""
		}
		id, ok := e.calls.claimCancel(tenant, session, m.Params.RequestID)
		if !ok {
			continue
		}
		reason := m.Params.Reason
		if reason == "" {
			reason = "the MCP client cancelled the call"
		}
		e.cancel(tenant, id, reason)
	}
}

// cancel publishes a cancel record for the intent, with a bounded wait.
func (e *Endpoint) cancel(tenant, intentID, reason string) {
	ctx, stop := clockwork.WithTimeout(context.Background(), e.cfg.Clock, 10*time.Second)
	defer stop()
	if len(reason) > api.MaxCancelReason {
		reason = reason[:api.MaxCancelReason]
	}
	c := cancelRecord(tenant, intentID, reason)
	if err := e.cfg.Publisher.PublishCancel(ctx, c); err != nil {
		e.cfg.Logger.Warn("publish cancel failed", slog.String("intent_id", intentID), slog.Any("error", err))
	}
}

// initializeVersion returns the protocol version an initialize request
// asks for, if the body is one and the version is a known one.
func initializeVersion(msgs []wireMsg) string {
	if len(msgs) != 1 || msgs[0].Method != "initialize" {
		return ""
	}
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if json.Unmarshal(msgs[0].rawParams, &p) != nil {
		return ""
	}
	switch p.ProtocolVersion {
	case "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05":
		return p.ProtocolVersion
	}
	return ""
}

// maxSessions bounds the negotiated versions remembered; past it the
// oldest are forgotten (those sessions then go by their header).
const maxSessions = 100_000

// sessionVersions remembers each session's negotiated protocol version.
type sessionVersions struct {
	mu    sync.Mutex
	byID  map[string]string
	order []string
}

func newSessionVersions() *sessionVersions { return &sessionVersions{byID: map[string]string{}} }

func (s *sessionVersions) set(id, v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byID[id]; !ok {
		s.order = append(s.order, id)
	}
	s.byID[id] = v
	for len(s.byID) > maxSessions && len(s.order) > 0 {
		delete(s.byID, s.order[0])
		s.order = s.order[1:]
	}
	if len(s.order) > 2*maxSessions {
		kept := s.order[:0]
		for _, o := range s.order {
			if _, ok := s.byID[o]; ok {
				kept = append(kept, o)
			}
		}
		s.order = kept
	}
}

func (s *sessionVersions) get(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byID[id]
}

func (s *sessionVersions) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
}

// inflight counts requests being served, and lets Shutdown wait until none
// is (requests may still start meanwhile, unlike with a WaitGroup).
type inflight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n returns to 0
}

func (f *inflight) add() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		f.idle = make(chan struct{})
	}
	f.n++
}

func (f *inflight) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n--; f.n == 0 {
		close(f.idle)
	}
}

// wait returns when no request is in flight, or ctx ends.
func (f *inflight) wait(ctx context.Context) {
	f.mu.Lock()
	if f.n == 0 {
		f.mu.Unlock()
		return
	}
	idle := f.idle
	f.mu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
	}
}
