package main

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metricsRegistry is a node's Prometheus registry that also keeps what was
// registered with it, so that Describe lists every metric the node exports
// with its labels, vectors that have no series yet included (Gather leaves
// those out). The README's Metrics section is held to it
// (metrics_doc_test.go).
type metricsRegistry struct {
	*prometheus.Registry
	mu         sync.Mutex
	collectors []prometheus.Collector
}

func newMetricsRegistry() *metricsRegistry {
	return &metricsRegistry{Registry: prometheus.NewRegistry()}
}

// Register registers c and keeps it.
func (r *metricsRegistry) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.collectors = append(r.collectors, c)
	return nil
}

// MustRegister is Register, panicking on an error as prometheus.Registry's
// does.
func (r *metricsRegistry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister unregisters c and forgets it.
func (r *metricsRegistry) Unregister(c prometheus.Collector) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.collectors = slices.DeleteFunc(r.collectors, func(k prometheus.Collector) bool { return k == c })
	return r.Registry.Unregister(c)
}

// Describe sends the descriptions of every metric registered.
func (r *metricsRegistry) Describe(ch chan<- *prometheus.Desc) {
	r.mu.Lock()
	cs := slices.Clone(r.collectors)
	r.mu.Unlock()
	for _, c := range cs {
		c.Describe(ch)
	}
}
