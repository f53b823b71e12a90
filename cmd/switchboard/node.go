package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/lookup"
	"github.com/switchboard-mcp/switchboard/api/mcp"
	"github.com/switchboard-mcp/switchboard/contexts"
	"github.com/switchboard-mcp/switchboard/intents/client"
	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/lag"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/router/telemetry"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// node is one Switchboard instance: the router, the API, the reader of the
// results topic that feeds the API, and the publisher the API submits with.
type node struct {
	cfg     *config.Config                // as at start: what a reload cannot change is read here
	live    atomic.Pointer[config.Config] // the configuration in force (reload.go)
	log     *slog.Logger
	codec   *schemas.Codec
	api     *api.Server
	results *api.Results
	lookup  *lookup.Store // every intent's result and pending state (api/lookup)
	feed    *resultsFeed
	pub     *client.Publisher
	kafka   kafkaio.Settings
	store   *contexts.Store // the context snapshots, shared by every router the node runs
	lag     *lag.Sampler    // the agents' consumer lag, and the router group's backlog
	lagConn *kafkaio.LagAdmin
	hang    *lag.HangWatch      // hanging transactions on Switchboard's topics (shares lagConn's admin client)
	aborter *kafkaio.TxnAborter // ends them for hang (router.abort_hanging_transactions); nil: off
	ownLag  *lag.ConsumerLag    // the router consumer's lag, fed by whichever router runs
	traces  *telemetry.Provider // nil: tracing off (tracing.go)

	dropLookup func() // deletes the lookup store's temporary directory, if it has one

	mcp      *mcp.Endpoint // nil: http.mcp.disabled
	reloader *reloader     // nil: no reload ('switchboard dev')

	instanceID    string
	processMemory int64 // the process's memory budget (applyMemoryLimit); 0: none
	// routerMu orders the router's replacement (newRouter) and a reload's
	// apply (reconfigure): a new router is built with the configuration in
	// force, and a reload reaches the router that runs.
	routerMu  sync.Mutex
	router    atomic.Pointer[router.Router]
	reg       *metricsRegistry                // the node's metrics but the router's
	routerReg atomic.Pointer[metricsRegistry] // the current router's metrics
}

// newRouter builds a router (a new Kafka consumer and producer) and makes it
// the node's current one.
func (n *node) newRouter() error {
	n.routerMu.Lock()
	defer n.routerMu.Unlock()
	cfg := n.current()
	parts, err := kafkaio.RouterParts(context.Background(), n.kafka, cfg, n.codec)
	if err != nil {
		return err
	}
	n.instanceID = parts.InstanceID
	if ks, ok := parts.Source.(*kafkaio.Source); ok {
		ks.OnConsumerStats(n.ownLag.Observe)
	}
	reg := newMetricsRegistry()
	r, err := router.New(cfg, n.codec, parts.Source, parts.Sink, router.WithRestorer(parts.Restorer), router.WithFallbackFeed(parts.Feed),
		router.WithLogger(n.log.With("instance", parts.InstanceID)), router.WithRegisterer(reg), router.WithContexts(n.store),
		router.WithTracerProvider(n.tracerProvider()), router.WithProcessMemory(n.processMemory), router.WithQueueBytes(cfg.Memory().PollQueue))
	if err != nil {
		_ = parts.Source.Close()
		_ = parts.Sink.Close()
		return err
	}
	n.routerReg.Store(reg)
	n.router.Store(r)
	return nil
}

// runRouter runs the router until ctx ends. When it stops on a fatal Kafka
// error (librdkafka can fence a static member after a long broker outage, and
// such a client never recovers), a new router with new clients takes over,
// after a backoff: the process keeps serving instead of hanging or exiting.
func (n *node) runRouter(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		err := n.router.Load().Run(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var fatal *port.FatalError
		if !errors.As(err, &fatal) {
			return err
		}
		wait := min(time.Second<<min(attempt, 5), 30*time.Second)
		n.log.Error("the router stopped on a fatal Kafka error; starting a new one", "error", err, "in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		for err := n.newRouter(); err != nil; err = n.newRouter() {
			n.log.Error("starting a new router", "error", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
	}
}

// gathererFunc adapts a function to prometheus.Gatherer.
type gathererFunc func() ([]*dto.MetricFamily, error)

func (f gathererFunc) Gather() ([]*dto.MetricFamily, error) { return f() }

func settingsOf(cfg *config.Config, clientID string) kafkaio.Settings {
	return kafkaio.Settings{Bootstrap: cfg.Kafka.BootstrapServers, Properties: cfg.Kafka.Properties, ClientID: clientID}
}

// codecFor writes Avro when the config names a registry, JSON otherwise.
func codecFor(cfg *config.Config) (*schemas.Codec, error) {
	if cfg.SchemaRegistry.URL == "" {
		return schemas.NewCodec()
	}
	var opts []schemas.RegistryOption
	if cfg.SchemaRegistry.Username != "" {
		opts = append(opts, schemas.WithBasicAuth(cfg.SchemaRegistry.Username, cfg.SchemaRegistry.Password))
	}
	reg, err := schemas.NewRegistry(cfg.SchemaRegistry.URL, opts...)
	if err != nil {
		return nil, err
	}
	return schemas.NewCodec(schemas.WithRegistry(reg))
}

// configFile is where serve's configuration came from, for reloads.
type configFile struct {
	path, instance, hash string
}

// newNode builds a node; with file set, it reloads that file on SIGHUP and
// POST /v1/admin/reload (reload.go). processMemory is the process's memory
// budget its routers hold their intake to (applyMemoryLimit; 0: none).
func newNode(cfg *config.Config, apiCfg api.Config, log *slog.Logger, file *configFile, processMemory int64) (*node, error) {
	codec, err := codecFor(cfg)
	if err != nil {
		return nil, err
	}
	n := &node{cfg: cfg, log: log, codec: codec, kafka: settingsOf(cfg, "switchboard"), processMemory: processMemory}
	n.live.Store(cfg)
	n.kafka.Logger = log // librdkafka's lines, as the node's
	reg := newMetricsRegistry()
	n.reg = reg
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var reload api.Option
	if file != nil {
		if n.reloader, err = newReloader(file.path, file.instance, file.hash, n, reg); err != nil {
			return nil, err
		}
		reload = api.WithReload(n.reloader.reload)
	}
	n.store, err = contexts.NewStore(kafkaio.SnapshotReader{Settings: n.kafka, Topic: cfg.Topics.ContextSnapshots}, codec,
		contexts.WithMaxAge(cfg.Contexts.MaxAge.D()), contexts.WithRegisterer(reg), contexts.WithLogger(log))
	if err != nil {
		return nil, err
	}
	if err := n.newLag(reg); err != nil {
		return nil, err
	}
	built := false
	defer func() {
		if !built {
			n.closeLag()
			n.flushTraces()
		}
	}()
	if n.traces, err = telemetry.New(cfg.Telemetry.Traces, telemetry.WithComponent("serve", cfg.Router.InstanceID)); err != nil {
		return nil, err
	}
	if err := n.newRouter(); err != nil {
		return nil, err
	}
	gatherer := gathererFunc(func() ([]*dto.MetricFamily, error) {
		return prometheus.Gatherers{reg, n.routerReg.Load()}.Gather()
	})
	n.pub, err = client.NewPublisher(n.kafka, codec, cfg.Topics.Requests)
	if err != nil {
		return nil, err
	}
	n.results = api.NewResults(cfg.HTTP.Results, api.WithResultsMaxBytes(cfg.HTTP.ResultsMaxBytes))
	order, err := api.NewFeed(n.results, api.FeedConfig{Registerer: reg})
	if err != nil {
		return nil, err
	}
	if n.lookup, n.dropLookup, err = openLookup(cfg, log); err != nil {
		return nil, err
	}
	defer func() {
		if !built {
			_ = n.lookup.Close()
			n.dropLookup()
		}
	}()
	n.feed, err = newResultsFeed(n.kafka, codec, log, order, n.lookup, feedTopics{
		Results: cfg.Topics.Results, Timeouts: cfg.Topics.Timeouts, Progress: cfg.Topics.Progress, Pending: cfg.Topics.Pending,
		Prefetch: cfg.Memory().FeedPrefetch,
	})
	if err != nil {
		return nil, err
	}
	catalog := catalogOf(cfg)
	admission, err := newAdmission(cfg, n.lag, reg)
	if err != nil {
		return nil, err
	}
	waitLimit, err := api.NewWaitLimit(api.WaitLimitConfig{
		Max: cfg.HTTP.MaxWaiting, MaxPerTenant: cfg.HTTP.MaxWaitingPerTenant,
		MaxBytes: cfg.HTTP.MaxWaitingBytes, MaxBytesPerTenant: cfg.HTTP.MaxWaitingBytesPerTenant,
	}, reg)
	if err != nil {
		return nil, err
	}
	var mcpDoor api.Option
	if !cfg.HTTP.MCP.Disabled {
		sessionLimit, err := api.NewSessionLimit(api.SessionLimitConfig{Max: cfg.HTTP.MCP.MaxSessions, MaxPerTenant: cfg.HTTP.MCP.MaxSessionsPerTenant}, reg)
		if err != nil {
			return nil, err
		}
		ep, err := mcp.New(mcp.Config{
			Catalog: catalog, Publisher: n.pub, Results: n.results, Progress: mcp.WatchProgress{Results: n.results, MaxBytes: cfg.HTTP.WebSocket.SendQueueBytes},
			Lookup:      api.NewIntentLookup(n.results, n.lookup),
			Logger:      log.With("component", "mcp"),
			ResultGrace: cfg.HTTP.MCP.ResultGrace.D(), SSEPollAfter: cfg.HTTP.MCP.SSEPollAfter.D(),
			SessionTimeout: cfg.HTTP.MCP.SessionTimeout.D(), TaskTTL: cfg.Router.DedupWindow.D(), Version: version(),
			TracerProvider: n.tracerProvider(), Admission: admission, WaitLimit: waitLimit, SessionLimit: sessionLimit,
		})
		if err != nil {
			return nil, err
		}
		mcpDoor = api.WithMCP(ep)
		n.mcp = ep
	}
	n.api, err = api.New(apiCfg, n.pub, n.results, mcpDoor, reload, api.WithLookup(n.lookup),
		api.WithLogger(log), api.WithRegisterer(reg), api.WithGatherer(gatherer),
		api.WithHistory(n.feed), api.WithCatalog(catalog),
		api.WithIdempotencyWindow(cfg.Router.DedupWindow.D()), api.WithAdmission(admission), api.WithWaitLimit(waitLimit),
		api.WithAgentState(n.agentState), api.WithAgentLag(n.agentLag),
		api.WithReadiness(n.ready), api.WithDegradation(n.degraded), api.WithContexts(n.store),
		api.WithTracerProvider(n.tracerProvider()), api.WithTraceURL(cfg.Telemetry.TraceURL))
	if err != nil {
		return nil, err
	}
	built = true
	return n, nil
}

// ready is the node's readiness: the router's; the lookup store's (until
// it has read the results topic up to where it ended at the start, a
// lookup could miss an intent); and, when an intent type attaches context,
// the context store's (until it has caught up with the snapshot topic,
// intents would be dispatched with context missing).
func (n *node) ready() error {
	if err := n.router.Load().Ready(); err != nil {
		return err
	}
	if err := n.feed.mat.Ready(); err != nil {
		return err
	}
	for _, it := range n.current().Intents {
		if it.Context == config.ContextAttach {
			return n.store.Ready()
		}
	}
	return nil
}

// degraded is what /readyz lists while ready: a hanging transaction on one
// of the node's topics. It does not make the node unready: every instance
// sees the same one, and only an operator's abort ends it.
func (n *node) degraded() []string {
	if err := n.hang.Err(); err != nil {
		return []string{err.Error()}
	}
	return nil
}

// run runs every part until ctx ends or one part fails. The parts (router,
// API, results reader, context store, lag sampler, hanging-transaction
// watch) then stop together, each
// with the end of the one context they share (the router drains and commits,
// the API shuts its server down), and run waits for all of them; only then,
// in order, it closes the lag sampler's admin client and the publisher, then
// the lookup store (and deletes its temporary directory), and last exports
// the spans still batched.
func (n *node) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 9) // one per part, and the lookup store's
	part := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && !errors.Is(err, context.Canceled) {
				if !strings.HasPrefix(err.Error(), name+": ") { // the api's errors already say "api: "
					err = fmt.Errorf("%s: %w", name, err)
				}
				errs <- err
				cancel()
			}
		}()
	}
	part("router", n.runRouter)
	part("api", n.api.Run)
	part("results reader", n.feed.run)
	part("context store", n.store.Run)
	part("lag sampler", n.lag.Run)
	part("hanging-transaction watch", n.hang.Run)
	if n.reloader != nil {
		part("reload", n.reloader.run)
	}
	<-ctx.Done()
	wg.Wait()
	n.closeLag()
	n.pub.Close()
	if err := n.lookup.Close(); err != nil {
		errs <- fmt.Errorf("lookup store: %w", err)
	}
	n.dropLookup()
	n.flushTraces()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// current is the configuration in force: the one at start, or the last
// reload's.
func (n *node) current() *config.Config { return n.live.Load() }

// reconfigure applies a reread configuration (reload.go has checked that
// nothing in it needs a restart): to the router first, so that an intent
// type the API starts to list is routable, then to the API's and the MCP
// endpoint's catalogs. A router that stops meanwhile (a fatal Kafka error)
// is not an error: its replacement is built with cfg.
func (n *node) reconfigure(ctx context.Context, cfg *config.Config) error {
	ctx, cancel := context.WithTimeout(ctx, reloadTimeout)
	defer cancel()
	n.routerMu.Lock()
	err := n.router.Load().Reconfigure(ctx, cfg)
	if err != nil && !errors.Is(err, router.ErrStopped) {
		n.routerMu.Unlock()
		return err
	}
	n.live.Store(cfg)
	n.routerMu.Unlock()
	catalog := catalogOf(cfg)
	n.api.SetCatalog(catalog)
	if n.mcp != nil {
		n.mcp.SetCatalog(catalog)
	}
	return nil
}

// agentState is an agent's router-side state for GET /v1/agents: its circuit
// breaker, in-flight and queued counts on this instance, and its limits.
func (n *node) agentState(agent string) any {
	r := n.router.Load()
	if r == nil {
		return nil
	}
	for _, v := range r.Agents() {
		if v.Name == agent {
			return v
		}
	}
	return nil
}

// openLookup opens the lookup store in http.lookup.dir, or, when none is
// set, in a temporary directory that drop deletes (every start then
// rebuilds the store from the topics).
func openLookup(cfg *config.Config, log *slog.Logger) (store *lookup.Store, drop func(), err error) {
	dir, drop := cfg.HTTP.Lookup.Dir, func() {}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "switchboard-lookup-"); err != nil {
			return nil, nil, fmt.Errorf("lookup store: %w", err)
		}
		drop = func() { _ = os.RemoveAll(dir) }
		log.Info("http.lookup.dir is not set: the lookup store lives in a temporary directory and is rebuilt from the topics at every start", "dir", dir)
	}
	store, err = lookup.Open(dir, lookup.WithCacheBytes(int64(cfg.HTTP.Lookup.CacheMB)<<20), lookup.WithLogger(log))
	if err != nil {
		drop()
		return nil, nil, err
	}
	return store, drop, nil
}

// newLag builds the lag sampler of the agents' groups and the router's own
// (its own admin client and reader) and the collector of the router consumer's lag, registered with reg.
func (n *node) newLag(reg prometheus.Registerer) error {
	var err error
	if n.ownLag, err = lag.NewConsumerLag(reg); err != nil {
		return err
	}
	groups := make([]lag.Group, 0, len(n.cfg.Agents))
	for name, a := range n.cfg.Agents {
		groups = append(groups, lag.Group{Agent: name, GroupID: a.GroupID, Topic: a.Topic})
	}
	lagKafka := settingsOf(n.cfg, "switchboard-lag")
	lagKafka.Logger = n.log
	if n.lagConn, err = kafkaio.NewLagAdmin(lagKafka); err != nil {
		return err
	}
	n.lag, err = lag.NewSampler(n.lagConn, groups, lag.WithInterval(n.cfg.Router.LagInterval.D()),
		lag.WithRouterGroup(n.cfg.Kafka.GroupID, n.cfg.Topics.Requests),
		lag.WithRegisterer(reg), lag.WithLogger(n.log))
	if err == nil {
		n.hang, err = n.newHangWatch(reg, lagKafka)
	}
	if err != nil {
		n.closeLag()
	}
	return err
}

// closeLag closes the lag sampler's and the hanging-transaction watch's
// clients.
func (n *node) closeLag() {
	_ = n.lagConn.Close()
	if n.aborter != nil {
		n.aborter.Close()
	}
}

// newHangWatch builds the watch for hanging transactions on the topics
// Switchboard reads and writes (read_committed readers stall behind one)
// and, under exactly_once, the router group's partition of
// __consumer_offsets (a takeover's committed-offset read stalls there):
// sampled as often as the agents' lag, reported after twice the router's
// transaction timeout. Unless router.abort_hanging_transactions is false
// it aborts them itself too; a client that cannot be built (a SASL
// mechanism franz-go's aborter does not speak) leaves it watching only,
// and says so.
func (n *node) newHangWatch(reg prometheus.Registerer, s kafkaio.Settings) (*lag.HangWatch, error) {
	t := n.cfg.Topics
	topics := []string{t.Requests, t.Responses, t.Results, t.Timeouts, t.DeadLetter, t.Pending, t.Progress}
	for _, a := range n.cfg.Agents {
		topics = append(topics, a.Topic)
	}
	opts := []lag.HangOption{
		lag.WithHangInterval(n.cfg.Router.LagInterval.D()),
		lag.WithHangAfter(2 * kafkaio.TransactionTimeout(s)), lag.WithHangAbortAfter(kafkaio.TransactionTimeout(s)),
		lag.WithHangBootstrap(n.cfg.Kafka.BootstrapServers),
		lag.WithHangRegisterer(reg), lag.WithHangLogger(n.log),
	}
	if n.cfg.Router.Delivery == config.ExactlyOnce { // its offsets are committed in the transactions
		opts = append(opts, lag.WithHangGroupOffsets(n.cfg.Kafka.GroupID))
	}
	if n.cfg.Router.AbortsHangingTransactions() {
		a, err := kafkaio.NewTxnAborter(s)
		if err != nil {
			n.log.Warn("the hanging-transaction watch will only report, not abort: " + err.Error())
		} else {
			n.aborter = a
			opts = append(opts, lag.WithHangAborter(a))
		}
	}
	return lag.NewHangWatch(n.lagConn, topics, opts...)
}

// agentLag is an agent's consumer lag for GET /v1/agents.
func (n *node) agentLag(agent string) any {
	if a, ok := n.lag.Agent(agent); ok {
		return a
	}
	return nil
}
