package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchboard-mcp/switchboard/api"
)

// maxMetricsConnections bounds the metrics listener's connections, as the
// API's admin listener is bounded: scrapers and probes hold a few; one more
// is closed at once and counted in
// switchboard_metrics_connections_refused_total.
const maxMetricsConnections = 64

// metricsServer serves a command's own metrics, for the long-running
// commands that have no API (context aggregate): GET /metrics (Prometheus
// text) and GET /healthz, on a listener of their own.
type metricsServer struct {
	reg    *prometheus.Registry
	srv    *http.Server
	ln     net.Listener
	log    *slog.Logger
	served chan struct{} // closed when Serve returned, once serve ran
}

// listenMetrics listens on addr (host:port; port 0 picks one) and returns
// a server whose registry holds Go's and the process's collectors; the
// command registers its own metrics in reg before serve. A collector that
// fails leaves its metrics out of the scrape, not the rest.
func listenMetrics(addr string, log *slog.Logger) (*metricsServer, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("--metrics-listen %q: not host:port (e.g. 127.0.0.1:9102)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen %s: %w", addr, err)
	}
	reg := prometheus.NewRegistry()
	refused := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "switchboard_metrics_connections_refused_total",
		Help: "Connections the metrics listener (--metrics-listen) closed at once, unanswered, because it already held its 64.",
	})
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), refused)
	ln = api.BoundListener(ln, maxMetricsConnections, refused)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	return &metricsServer{
		reg: reg, ln: ln, log: log,
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute},
	}, nil
}

// serve serves until close.
func (m *metricsServer) serve() {
	m.served = make(chan struct{})
	m.log.Info("metrics listening", "addr", m.ln.Addr().String())
	go func() {
		defer close(m.served)
		if err := m.srv.Serve(m.ln); !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("the metrics listener stopped", "addr", m.ln.Addr().String(), "error", err)
		}
	}()
}

// close stops the server, giving scrapes in progress a second, and waits
// for it.
func (m *metricsServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
	if m.served != nil {
		<-m.served
	} else {
		_ = m.ln.Close()
	}
}
