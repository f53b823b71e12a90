package api

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the api's own Prometheus collectors.
type metrics struct {
	requests      *prometheus.CounterVec   // route, code
	duration      *prometheus.HistogramVec // route
	wsConnections prometheus.Gauge
	wsSent        prometheus.Counter
	wsSlow        prometheus.Counter
	wsHandoffs    prometheus.Counter
	writeTimeouts *prometheus.CounterVec // route (writewait.go)
	securityMetrics
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_api_requests_total",
			Help: "HTTP requests served, by route pattern and status code (101 for WebSocket upgrades).",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchboard_api_request_duration_seconds",
			Help:    "Time to serve an HTTP request, by route pattern (WebSocket connections are not observed).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route"}),
		wsConnections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_ws_connections",
			Help: "Open WebSocket connections.",
		}),
		wsSent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_ws_messages_sent_total",
			Help: "Messages written to WebSocket clients (results, acknowledgements and errors).",
		}),
		wsSlow: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_ws_slow_client_disconnects_total",
			Help: "WebSocket clients disconnected (close code 1013) because their send queue was full.",
		}),
		wsHandoffs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_ws_write_handoffs_total",
			Help: "Writes to a WebSocket client handed from its flush shard to the connection's own writer: the socket did not take the write whole (the client reads slower than results arrive), or another write to it was under way.",
		}),
	}
	m.writeTimeouts = newWriteTimeouts()
	cs := []prometheus.Collector{m.requests, m.duration, m.wsConnections, m.wsSent, m.wsSlow, m.wsHandoffs, m.writeTimeouts}
	cs = append(cs, m.collectors()...)
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("api: register metrics: %w", err)
		}
	}
	return m, nil
}
