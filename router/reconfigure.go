package router

import (
	"context"
	"fmt"
	"strings"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// Hot reload. A reread configuration reaches the engine like any other
// event: Reconfigure hands it to the event loop, which swaps the routes of
// the intent types and retunes the agents' admission and breakers between
// two records. No lock guards the engine; nothing is dropped.
//
// An intent keeps what it was admitted with: its deadline (computed at
// intake), and its route (timeout policy, fallback, retry, idle timeout,
// progress limits), which a reload replaces for new intents only. An
// intent restored from the pending changelog (a partition taken over)
// takes the route configured when it is restored, and the deadline it was
// given. Admission limits and breakers are the agent's, so they apply at
// once to queued and new dispatches alike.

// reconfigReq asks the event loop to apply a configuration.
type reconfigReq struct {
	cfg  *config.Config
	done chan struct{}
}

// Reconfigure applies cfg's intent types, agents' admission and breakers to
// the running router, in its event loop, and returns once it has. It
// refuses (ErrNeedsRestart, naming the keys) a cfg that differs from the
// router's in anything else (config.RestartKeys), leaving the router as it
// was. cfg must have been validated (config.Load) and not be modified
// afterwards. It returns ErrStopped when the router has stopped (or stops)
// first, and ctx's error when ctx ends first. Safe for concurrent use.
func (r *Router) Reconfigure(ctx context.Context, cfg *config.Config) error {
	if keys := config.RestartKeys(r.cfg, cfg); len(keys) > 0 {
		return fmt.Errorf("%w: %s", ErrNeedsRestart, strings.Join(keys, ", "))
	}
	req := reconfigReq{cfg: cfg, done: make(chan struct{})}
	select {
	case r.reconfigs <- req:
	case <-r.done:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once taken, the loop applies it before anything else: waiting is short.
	select {
	case <-req.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reconfigure is the event loop's side of Reconfigure.
func (r *Router) reconfigure(cfg *config.Config) {
	now := r.opts.clock.Now().UnixMilli()
	r.engine.reconfigure(cfg, now)
	r.engine.flush(now) // raised limits let queued intents go now
	views := r.engine.agentViews(now)
	r.agents.Store(&views)
	r.viewsAt = now
	r.d.settle()
	r.opts.log.Info("configuration applied", "intent_types", len(cfg.Intents), "agents", len(cfg.Agents), "pending", len(r.engine.pending))
}

// reconfigure retunes the agents and replaces the routes. cfg has the same
// agents as the engine's (config.RestartKeys refuses a change to the set).
func (e *engine) reconfigure(cfg *config.Config, nowMs int64) {
	for _, a := range e.agentList {
		if c := cfg.Agents[a.name]; c != nil {
			a.retune(c, e.m, nowMs)
			e.wake(a)
		}
	}
	e.routes = e.routesOf(cfg)
}

// retune applies an agent's reread admission limits and breaker. The
// intents it holds (in flight, queued) stay; a lower limit takes effect as
// they leave. A breaker whose settings change keeps its state; one added
// starts closed; one removed admits everything from now on.
func (a *agentRoute) retune(c *config.Agent, m *metrics, nowMs int64) {
	a.maxInFlight, a.queueLimit = c.MaxInFlight, c.QueueLimit
	a.overloadOf(c)
	if a.rate > 0 && nowMs > a.refilledAt { // the tokens earned at the old rate
		a.tokens = min(a.burst, a.tokens+float64(nowMs-a.refilledAt)*a.rate/1000)
	}
	if a.rate == 0 {
		a.tokens = max(c.Rate, 1) // a bucket added starts full, as at start
	}
	a.refilledAt = nowMs
	a.rate, a.burst = c.Rate, max(c.Rate, 1)
	a.tokens = min(a.tokens, a.burst)
	switch nb := newBreaker(c.CircuitBreaker); {
	case nb == nil:
		if a.breaker != nil {
			m.circuitState.DeleteLabelValues(a.name)
		}
		a.breaker, a.circuit = nil, nil
	case a.breaker == nil:
		a.breaker = nb
		a.circuit = m.circuitState.WithLabelValues(a.name)
		a.circuit.Set(float64(circuitClosed))
	default:
		a.breaker.retune(nb)
	}
}

// retune takes nb's settings and keeps b's state; the outcomes counted so
// far are dropped when the window's buckets change size.
func (b *breaker) retune(nb *breaker) {
	if nb.bucketMs != b.bucketMs {
		b.buckets = [windowBuckets]outcomeBucket{}
	}
	b.consecutiveMax, b.rate, b.minRequests, b.bucketMs, b.openMs, b.probes = nb.consecutiveMax, nb.rate, nb.minRequests, nb.bucketMs, nb.openMs, nb.probes
}

// routesOf builds the route of each intent type of cfg, over the engine's
// agents. A pending intent keeps the route it was admitted with: a reload
// (reconfigure.go) builds new ones, it does not change these.
func (e *engine) routesOf(cfg *config.Config) map[string]*route {
	routes := make(map[string]*route, len(cfg.Intents))
	for name, it := range cfg.Intents {
		r := &route{
			name:   name,
			agent:  e.agents[it.Agent],
			policy: intents.TimeoutPolicy{Default: it.Timeout.D(), Min: it.MinTimeout.D(), Max: it.MaxTimeout.D()},
			retry:  newRetryPolicy(it.Retry),
			idleMs: it.IdleTimeout.D().Milliseconds(),
			m:      e.m.forRoute(name, it.Agent),

			progress: progressLimitsOf(it.Progress),
		}
		r.attachContext, r.contextMaxAge = it.Context == config.ContextAttach, it.ContextMaxAge.D()
		if it.InputSchema != nil {
			r.input = it.InputSchema.Schema
		}
		if fc := it.Fallback.Cache; fc != nil {
			r.cacheKey, r.cacheMaxAge = fc.Key, fc.MaxAge.D()
		}
		if it.Fallback.StaticJSON != "" {
			s := schemas.JSON(it.Fallback.StaticJSON)
			r.static = &s
		}
		routes[name] = r
	}
	return routes
}
