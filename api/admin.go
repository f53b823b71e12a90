package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
)

// The admin listener (Config.AdminListen, http.admin_listen) serves GET
// /healthz, /readyz and /metrics, and nothing else, on an address of its
// own. The API's listener serves them too, but it holds at most
// Config.MaxHTTPConnections, and callers who fill it (a flood of
// connections, thousands of streams) would fail the liveness probe and
// the scrape with everyone else: an orchestrator would then restart a
// process that is only busy, and the dashboards would go blank when they
// are needed. The admin listener has its own, small bound
// (maxAdminConnections): it is for probes and scrapers, on an address
// callers do not reach. Its routes go through the same middleware as the
// API's (a /metrics made private by http.auth.public_paths still needs a
// credential), and it shuts down last, so that /readyz answers 503 there
// while the API drains.

// maxAdminConnections bounds the admin listener's connections: probes and
// scrapers hold a few; one more is closed at once and counted (reason
// "admin_connections").
const maxAdminConnections = 256

// ReasonAdminConnections is the reason counted, in
// switchboard_api_admission_refused_total, for a connection the admin
// listener closed at once because it already held maxAdminConnections.
const ReasonAdminConnections = "admin_connections"

// admin is the admin listener's server, when Config.AdminListen is set.
type admin struct {
	srv     *http.Server
	open    atomic.Int64
	refused prometheus.Counter
	addr    string // set by Run once it listens, under Server.mu
}

// newAdmin returns the admin server of s's admin routes, or nil when
// Config.AdminListen is empty.
func (s *Server) newAdmin(metricsHandler http.Handler, refused prometheus.Counter) *admin {
	if s.cfg.AdminListen == "" {
		return nil
	}
	r := chi.NewRouter()
	r.Use(s.observe, s.limitBody, s.recoverer, s.guard)
	r.NotFound(s.notFound)
	r.MethodNotAllowed(s.methodNotAllowed)
	s.mountProbes(r, metricsHandler)
	return &admin{
		srv: &http.Server{
			Handler:           r,
			ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
			IdleTimeout:       s.cfg.IdleTimeout,
			MaxHeaderBytes:    s.cfg.MaxHeaderBytes,
			ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		},
		refused: refused,
	}
}

// listen binds the admin listener.
func (a *admin) listen(ctx context.Context, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("api: admin listener on %s: %w", addr, err)
	}
	return newBoundedListener(ln, maxAdminConnections, &a.open, a.refused), nil
}

// serve serves ln until shutdown; an error other than the server's close
// is logged (the API goes on: the admin listener is for probes and
// scrapers, and its absence shows there).
func (a *admin) serve(ln net.Listener, log *slog.Logger) {
	if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("the admin listener stopped", slog.String("addr", ln.Addr().String()), slog.Any("error", err))
	}
}

// shutdown stops the admin server, at once if ctx ends first.
func (a *admin) shutdown(ctx context.Context) {
	if a == nil {
		return
	}
	if err := a.srv.Shutdown(ctx); err != nil {
		_ = a.srv.Close()
	}
}

// AdminAddr returns the address the admin listener is listening on: ""
// without Config.AdminListen, or before Run listens.
func (s *Server) AdminAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.adminSrv == nil {
		return ""
	}
	return s.adminSrv.addr
}
