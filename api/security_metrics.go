package api

import "github.com/prometheus/client_golang/prometheus"

// securityMetrics count refused requests and the stream limits at work.
type securityMetrics struct {
	authFailures    *prometheus.CounterVec // code
	authDisabled    prometheus.Gauge
	wsRateLimited   prometheus.Counter
	wsPolicyCloses  prometheus.Counter
	wsTenantRefused prometheus.Counter
}

// collectors creates the collectors and returns them for registration.
func (m *securityMetrics) collectors() []prometheus.Collector {
	m.authFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_auth_failures_total",
		Help: "Requests refused before reaching a handler, by error code (unauthenticated, invalid_token, token_expired, token_not_yet_valid, invalid_api_key, forbidden_origin).",
	}, []string{"code"})
	m.authDisabled = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "switchboard_auth_disabled",
		Help: "1 when the API serves without authentication (every caller sees every tenant), else 0.",
	})
	m.wsRateLimited = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "switchboard_ws_rate_limited_messages_total",
		Help: "WebSocket client messages dropped for going over the message rate.",
	})
	m.wsPolicyCloses = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "switchboard_ws_rate_limit_disconnects_total",
		Help: "WebSocket clients disconnected (close code 1008) for staying over the message rate.",
	})
	m.wsTenantRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "switchboard_ws_tenant_limit_refusals_total",
		Help: "WebSocket upgrades refused (429) because the tenant held its maximum of connections.",
	})
	return []prometheus.Collector{m.authFailures, m.authDisabled, m.wsRateLimited, m.wsPolicyCloses, m.wsTenantRefused}
}

// warnAuthOff says loudly, now and every Config.Auth.AuthOffWarnings, that
// the API serves without authentication. Run calls it and the returned
// function stops the goroutine it starts, and waits for it.
func (s *Server) warnAuthOff() (stop func()) {
	warn := func() {
		s.log.Warn("AUTHENTICATION IS OFF: anyone who can reach " + s.Addr() +
			" can submit intents and read every tenant's results; set http.auth for production")
	}
	warn()
	done, quit := make(chan struct{}), make(chan struct{})
	t := s.clock.NewTicker(s.cfg.Auth.AuthOffWarnings)
	go func() {
		defer close(done)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.Chan():
				warn()
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}
