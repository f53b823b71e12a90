package contexts

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

type storeMetrics struct {
	read      *prometheus.CounterVec
	entities  prometheus.Gauge
	caughtUp  prometheus.Gauge
	lookups   *prometheus.CounterVec
	attachAge prometheus.Histogram

	// lookups by status, resolved once: Lookup is on the router's hot path.
	lookupFresh, lookupStale, lookupMissing prometheus.Counter
}

func newStoreMetrics(reg prometheus.Registerer) (*storeMetrics, error) {
	m := &storeMetrics{
		read: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_context_snapshots_read_total",
			Help: "Records read from the context-snapshot topic, by result: applied, tombstone, outdated (a lower version than held), invalid.",
		}, []string{"result"}),
		entities: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_context_store_entities",
			Help: "Entities the context store holds a snapshot of.",
		}),
		caughtUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_context_store_caught_up",
			Help: "1 once the context store has read the snapshot topic up to where it ended at start.",
		}),
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_context_lookups_total",
			Help: "Context lookups for intents, by status: fresh, stale, missing.",
		}, []string{"status"}),
		attachAge: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "switchboard_context_attach_age_seconds",
			Help:    "Age (now - snapshot_ts) of the context snapshots attached to intents.",
			Buckets: []float64{0.1, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 900},
		}),
	}
	m.lookupFresh = m.lookups.WithLabelValues("fresh")
	m.lookupStale = m.lookups.WithLabelValues("stale")
	m.lookupMissing = m.lookups.WithLabelValues("missing")
	return m, register(reg, m.read, m.entities, m.caughtUp, m.lookups, m.attachAge)
}

func register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	var errs []error
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(append([]error{errors.New("contexts: registering metrics")}, errs...)...)
	}
	return nil
}
