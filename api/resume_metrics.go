package api

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// frontMetrics count resumes and idempotent repeats (kept apart from
// metrics.go's connection and request metrics).
type frontMetrics struct {
	resumes  *prometheus.CounterVec // result: resumed, cursor_expired, refused, failed
	replayed prometheus.Counter
	repeats  prometheus.Counter
}

func newFrontMetrics(reg prometheus.Registerer) (*frontMetrics, error) {
	m := &frontMetrics{
		resumes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_ws_resumes_total",
			Help: "WebSocket resume requests, by result: resumed, cursor_expired, refused (a bad or unserviceable request), failed (the replay broke off).",
		}, []string{"result"}),
		replayed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_ws_replayed_messages_total",
			Help: "Messages replayed from Kafka to resuming WebSocket clients.",
		}),
		repeats: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_api_idempotent_repeats_total",
			Help: "POST /v1/intents repeats (same Idempotency-Key or intent_id) answered without publishing.",
		}),
	}
	cs := []prometheus.Collector{m.resumes, m.replayed, m.repeats}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("api: register metrics: %w", err)
		}
	}
	for _, r := range []string{"resumed", "cursor_expired", "refused", "failed"} {
		m.resumes.WithLabelValues(r)
	}
	return m, nil
}
