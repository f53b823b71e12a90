package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/go-chi/chi/v5"
	"github.com/gorilla/websocket"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// Publisher publishes an intent request to the requests topic. PublishIntent
// returns once the broker has acknowledged the record, or with an error (the
// client then gets 503 and may retry with the same intent_id). It must be safe
// for concurrent use and honour ctx (the HTTP request's context). Its
// Canceller half publishes cancel records (DELETE /v1/intents/{id}).
type Publisher interface {
	PublishIntent(ctx context.Context, req *schemas.IntentRequest) error
	Canceller
}

// Server serves Switchboard's HTTP and WebSocket API (see [Server.Handler]).
// Create it with [New], serve with [Server.Run] (or mount [Server.Handler]),
// stop with [Server.Shutdown].
type Server struct {
	cfg        Config
	pub        Publisher
	results    *Results
	clock      clockwork.Clock
	log        *slog.Logger
	readiness  func() error
	degraded   func() []string
	contexts   ContextStore // nil: none
	history    History      // nil: no resume
	lookup     *intentLookup
	mcp        http.Handler                       // nil: none (mcpdoor.go)
	catalog    atomic.Pointer[catalogDoc]         // replaced by SetCatalog (reload.go)
	reload     func(context.Context) ReloadReport // nil: no POST /v1/admin/reload
	agentState func(string) any
	agentLag   func(string) any
	idem       *idempotency
	admission  *Admission // nil: admit everything (admission.go)
	waitLimit  *WaitLimit // nil: no bound on waiting callers (waiting.go)
	reading    *slots     // the bodies being read (reading.go)
	front      *frontMetrics
	metrics    *metrics
	sse        *sseMetrics
	router     *chi.Mux
	upgrader   websocket.Upgrader
	httpSrv    *http.Server
	adminSrv   *admin // the admin listener's server (admin.go); nil: none
	auth       *authenticator
	tracing    apiTracing // tracing.go

	// stopCtx is cancelled when Shutdown begins: it ends ?wait requests
	// (they answer 202 pending) and marks the server not ready.
	stopCtx    context.Context
	stopCancel context.CancelFunc

	mu          sync.Mutex
	closed      bool // Shutdown has begun
	running     bool // Run has been called
	addr        string
	ready       chan struct{} // closed once Run is listening
	conns       map[*wsConn]struct{}
	tenantConns map[string]int // stream connections by tenant (tenant.go)
	streamConns int            // stream connections in all (tenant.go)

	streamsRefused prometheus.Counter // refused{reason="stream_connections"}
	connsRefused   prometheus.Counter // refused{reason="connections"} (listener.go)
	connsOpen      atomic.Int64       // connections open on Run's listener (listener.go)
	streams        sync.WaitGroup     // one per tracked WebSocket connection
	sweeping       bool               // the keepalive goroutine was started
	sweeperStop    chan struct{}
	sweeperDone    chan struct{}
	flush          *flushShards  // write the stream's data frames; started with the keepalive
	shutdownDone   chan struct{} // closed when the first Shutdown returns

	// Resumes replaying history, and by tenant (resume.go; guarded by mu;
	// the map is made on first use).
	replays       int
	tenantReplays map[string]int
}

// New returns a Server that publishes through pub and answers from results.
// It validates cfg (applying defaults to zero fields) and registers the
// server's metrics; it starts no goroutine and opens no socket.
func New(cfg Config, pub Publisher, results *Results, opts ...Option) (*Server, error) {
	if pub == nil {
		return nil, fmt.Errorf("%w: nil Publisher", ErrInvalidConfig)
	}
	if results == nil {
		return nil, fmt.Errorf("%w: nil Results", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	cfg.AllowedOrigins = slices.Clone(cfg.AllowedOrigins)
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(o.registerer)
	if err != nil {
		return nil, err
	}
	if !cfg.Auth.Required {
		m.authDisabled.Set(1)
	}
	fm, err := newFrontMetrics(o.registerer)
	if err != nil {
		return nil, err
	}
	sm, err := newSSEMetrics(o.registerer, results)
	if err != nil {
		return nil, err
	}
	refused, err := refusedCounter(o.registerer)
	if err != nil {
		return nil, err
	}
	reading, err := newReadingSlots(cfg, o.registerer)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:            cfg,
		reading:        reading,
		connsRefused:   refused.WithLabelValues(ReasonConnections),
		pub:            pub,
		results:        results,
		clock:          o.clock,
		log:            o.logger,
		readiness:      o.readiness,
		degraded:       o.degraded,
		contexts:       o.contexts,
		history:        o.history,
		lookup:         &intentLookup{results: results, store: o.lookup},
		reload:         o.reload,
		agentState:     o.agentState,
		agentLag:       o.agentLag,
		tracing:        o.tracing,
		idem:           newIdempotency(o.clock, o.idempotencyWindow),
		admission:      o.admission,
		waitLimit:      o.waitLimit,
		metrics:        m,
		front:          fm,
		sse:            sm,
		ready:          make(chan struct{}),
		conns:          map[*wsConn]struct{}{},
		tenantConns:    map[string]int{},
		streamsRefused: refused.WithLabelValues(ReasonStreamConnections),
		auth:           newAuthenticator(cfg.Auth, o.clock, o.logger),
		sweeperStop:    make(chan struct{}),
		sweeperDone:    make(chan struct{}),
		flush:          newFlushShards(m.wsSent),
		shutdownDone:   make(chan struct{}),
	}
	if err := newConnsGauge(&s.connsOpen, o.registerer); err != nil {
		return nil, err
	}
	s.SetCatalog(o.catalog)
	results.expireInflight(o.clock, s.idem.window)
	s.stopCtx, s.stopCancel = context.WithCancel(context.Background())
	s.upgrader = websocket.Upgrader{
		ReadBufferSize:  1024,
		WriteBufferPool: &sync.Pool{},
		CheckOrigin:     s.checkOrigin,
		Subprotocols:    []string{streamProtocol},
		Error:           s.upgradeError,
	}
	metricsHandler := promhttp.HandlerFor(o.gatherer, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(o.logger.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	})
	s.router = s.routes(metricsHandler)
	s.adminSrv = s.newAdmin(metricsHandler, refused.WithLabelValues(ReasonAdminConnections))
	s.mountMCP(o.mcp)
	s.httpSrv = &http.Server{
		Handler:           s.router,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(o.logger.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// routes builds the router. Every response, errors included, is JSON (except
// /metrics and the console).
func (s *Server) routes(metricsHandler http.Handler) *chi.Mux {
	r := chi.NewRouter()
	r.Use(s.observe, s.limitBody, s.recoverer, s.guard, s.reserveBody)
	r.NotFound(s.notFound)
	r.MethodNotAllowed(s.methodNotAllowed)
	bounded := r.With(s.boundWrites) // writewait.go
	bounded.Post("/v1/intents", s.submitIntent)
	bounded.Get("/v1/intents/{id}", s.getIntent)
	bounded.Get("/v1/intents/{id}/events", s.serveEvents)
	r.Delete("/v1/intents/{id}", s.cancelIntent)
	r.Get("/v1/stream", s.serveStream)
	r.Get("/v1/contexts/{entity_id}", s.getContext)
	r.Get("/v1/agents", s.listAgents)
	r.Get("/v1/intent-types", s.listIntentTypes)
	r.Get("/v1/openapi.json", s.openAPI)
	r.Post("/v1/admin/reload", s.reloadConfig)
	r.Get("/", s.serveConsole)
	r.Get("/console/{file}", s.serveConsole)
	r.Get(wellKnownPRM, s.serveResourceMetadata)
	r.Get(wellKnownPRMMCP, s.serveResourceMetadata)
	s.mountProbes(r, metricsHandler)
	return r
}

// mountProbes mounts GET /healthz, /readyz and /metrics on r: the API's
// routes and the admin listener's (admin.go).
func (s *Server) mountProbes(r chi.Router, metricsHandler http.Handler) {
	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Method(http.MethodGet, "/metrics", metricsHandler)
}

// Handler returns the server's routes, for Run or for mounting on a server
// the caller owns (tests use httptest.NewServer(s.Handler())):
//
//	POST /v1/intents        submit an intent; ?wait=DURATION to wait for its result,
//	                        ?stream=sse to follow its progress and result (sse.go);
//	                        idempotent by Idempotency-Key or intent_id
//	GET  /v1/intents/{id}   the result and timeline, or the pending state, of any intent (memory, then
//	                        the IntentLookup); ?wait=DURATION waits for a pending one's result
//	GET  /v1/intents/{id}/events  Server-Sent Events: the intent's progress, then its result
//	DELETE /v1/intents/{id} cancel a pending intent (202; 409 once resolved)
//	GET  /v1/stream         WebSocket stream of results and timeout events
//	GET  /v1/agents         configured agents with live counts
//	GET  /v1/intent-types   configured intent types with live counts
//	GET  /v1/contexts/{entity_id}  the context snapshot this instance holds for an entity
//	GET  /v1/openapi.json   the OpenAPI 3 document of these routes
//	GET  /                  the console (and /console/{file})
//	GET  /metrics           Prometheus metrics from the gatherer
//	GET  /healthz           200 {"status":"ok"} while the process serves
//	GET  /readyz            200 {"status":"ready"} (with "degraded": [...] when WithDegradation lists problems), or 503 with the reason
//
// Errors are JSON: {"error":{"code":"...","message":"...","field":"..."}},
// with field present when one field or parameter is at fault.
//
// The stream protocol: every message is one JSON text message. The client
// sends
//
//	{"subscribe":{"intent_ids":["id1","id2"]}}
//	{"subscribe":{"session_id":"s-42"}}
//	{"subscribe":{"intent_type":"fraud_check"}}
//	{"subscribe":{"intent_ids":["id1"],"progress":true}}
//	{"unsubscribe":{"session_id":"s-42"}}
//	{"resume":{"cursor":"r0:12,r1:7,t0:3,t1:0","subscriptions":[{"session_id":"s-42"}]}}
//
// (the fields of one subscribe may be combined), and the server answers
//
//	{"type":"subscribed","cursor":"...","subscription":{"session_id":"s-42"}}
//	{"type":"unsubscribed","cursor":"...","subscription":{"session_id":"s-42"}}
//	{"type":"result","cursor":"...","result":{...IntentResult...}}
//	{"type":"timeout","cursor":"...","timeout":{...IntentTimeout...}}
//	{"type":"progress","cursor":"...","progress":{...IntentProgress...}}
//	{"type":"resumed","cursor":"...","replayed":12,"subscriptions":[...]}
//	{"type":"error","cursor":"...","error":{"code":"bad_message","message":"..."}}
//
// Every message carries the cursor of the position reached (see [Position]),
// except errors on a connection that has neither subscribed nor resumed;
// a client that reconnects sends resume first with its last cursor and its
// subscriptions, and gets what it missed replayed from the [History], then
// live messages, with none missed or repeated (see resume.go).
//
// A subscription with "progress": true also sends the progress of the
// intents it selects, each before the intent's result (progress.go).
// A result is sent once per connection even when several subscriptions match
// it. Subscribing by intent id sends the result at once if this instance
// already holds it, so a client may POST first and subscribe after; an
// intent-id subscription ends when its result has been sent. A bad message
// gets an error ("bad_message", or "too_many_subscriptions" past
// Config.MaxSubscriptions) and the connection stays open. The server pings
// every PingPeriod and drops a client silent for PongWait; a client whose send
// queue overflows is closed with 1013 (try again later); Shutdown closes with
// 1001 (going away); a message over MaxMessageBytes closes with 1009.
func (s *Server) Handler() http.Handler { return s.router }

// Run listens on Config.Listen and serves until ctx is done or Shutdown is
// called. When ctx ends it shuts the server down, allowing
// Config.ShutdownTimeout. It returns nil after a clean shutdown (never
// http.ErrServerClosed), the shutdown's error if it was not clean, a listen
// or serve error otherwise, ErrServerClosed if Shutdown came first, and
// ErrAlreadyRunning if Run was called before. To learn the bound address (with
// ":0"), wait for [Server.Ready] alongside Run's return, then call
// [Server.Addr].
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return ErrServerClosed
	case s.running:
		s.mu.Unlock()
		return ErrAlreadyRunning
	}
	s.running = true
	s.mu.Unlock()

	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("api: listen on %s: %w", s.cfg.Listen, err)
	}
	ln = newBoundedListener(ln, s.cfg.MaxHTTPConnections, &s.connsOpen, s.connsRefused)
	var adminLn net.Listener
	if s.adminSrv != nil {
		if adminLn, err = s.adminSrv.listen(ctx, s.cfg.AdminListen); err != nil {
			_ = ln.Close()
			return err
		}
		go s.adminSrv.serve(adminLn, s.log) // Serve closes adminLn when it returns
	}
	s.mu.Lock()
	s.addr = ln.Addr().String()
	if adminLn != nil {
		s.adminSrv.addr = adminLn.Addr().String()
	}
	close(s.ready)
	s.mu.Unlock()
	s.log.Info("api listening", slog.String("addr", ln.Addr().String()))
	if adminLn != nil {
		s.log.Info("admin listening: /healthz, /readyz, /metrics", slog.String("addr", adminLn.Addr().String()))
	}
	if !s.cfg.Auth.Required {
		stopWarning := s.warnAuthOff()
		defer stopWarning()
	}

	served := make(chan error, 1)
	go func() { served <- s.httpSrv.Serve(ln) }() // Serve closes ln when it returns

	select {
	case err := <-served:
		if errors.Is(err, http.ErrServerClosed) { // Shutdown was called: let it finish
			<-s.shutdownDone
			return nil
		}
		sctx, cancel := clockwork.WithTimeout(context.Background(), s.clock, s.cfg.ShutdownTimeout)
		defer cancel()
		_ = s.Shutdown(sctx)
		return fmt.Errorf("api: serve: %w", err)
	case <-ctx.Done():
		sctx, cancel := clockwork.WithTimeout(context.Background(), s.clock, s.cfg.ShutdownTimeout)
		defer cancel()
		err := s.Shutdown(sctx)
		if serr := <-served; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = fmt.Errorf("api: serve: %w", serr)
		}
		return err
	}
}

// Ready returns a channel closed once Run is listening, after which Addr
// returns the bound address. It is never closed if Run fails to listen, so
// wait for it together with Run's return:
//
//	errc := make(chan error, 1)
//	go func() { errc <- srv.Run(ctx) }()
//	select {
//	case <-srv.Ready():
//		addr := srv.Addr()
//	case err := <-errc:
//		// could not listen
//	}
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Addr returns the address Run is listening on ("" before it listens).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Shutdown stops the server gracefully, in this order:
//
//  1. /readyz turns 503, new WebSocket upgrades get 503, and pending ?wait
//     requests answer 202 "pending" at once;
//  2. every WebSocket connection is sent close code 1001 (going away), and
//     the MCP endpoint (if mounted and it has a Shutdown method) ends its
//     sessions and waiting calls;
//  3. the listener closes and in-flight HTTP requests are waited for;
//  4. WebSocket connections are waited for until their clients answer the
//     close; those that have not after Config.WriteWait are closed;
//  5. the keepalive goroutine stops;
//  6. the admin listener (Config.AdminListen) closes: until then its
//     /readyz answers 503.
//
// If ctx ends first, remaining connections are closed at once, Shutdown still
// waits for the server's goroutines (which then end promptly), and returns
// ctx's error. Shutdown is idempotent: later calls wait for the first to
// finish (or their own ctx) and return nil.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		select {
		case <-s.shutdownDone:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.closed = true
	s.stopCancel()
	conns := make([]*wsConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	sweeping := s.sweeping
	s.mu.Unlock()
	defer close(s.shutdownDone)

	for _, c := range conns {
		c.goAway()
	}
	s.shutdownMCP(ctx)
	err := s.httpSrv.Shutdown(ctx)
	if err != nil {
		_ = s.httpSrv.Close()
	}
	streamsDone := make(chan struct{})
	go func() {
		s.streams.Wait()
		close(streamsDone)
	}()
	// A client that does not answer the close frame within WriteWait is cut
	// off: that is the client's problem, not a failed shutdown.
	forceClose := func() {
		s.mu.Lock()
		for c := range s.conns {
			_ = c.conn.Close()
		}
		s.mu.Unlock()
		<-streamsDone
	}
	select {
	case <-streamsDone:
	case <-s.clock.After(s.cfg.WriteWait):
		s.log.Warn("closing WebSocket clients that did not answer the close frame", slog.Duration("waited", s.cfg.WriteWait))
		forceClose()
	case <-ctx.Done():
		forceClose()
		if err == nil {
			err = ctx.Err()
		}
	}
	close(s.sweeperStop)
	if sweeping {
		<-s.sweeperDone
		s.flush.wg.Wait()
	}
	s.adminSrv.shutdown(ctx)
	return err
}
