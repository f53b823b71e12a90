package lag

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// ConsumerStats is what a Kafka consumer's client statistics say of how far
// it is behind, as router/kafkaio reads them from librdkafka's.
type ConsumerStats struct {
	// Partitions are the consumer's assigned partitions whose lag is known.
	Partitions []ConsumerPartition
	// Rebalances is how many times the client's assignment changed since it
	// was created.
	Rebalances int64
}

// ConsumerPartition is one assigned partition's lag.
type ConsumerPartition struct {
	Topic     string
	Partition int32
	// Records is the partition's end (its last stable offset for a
	// read_committed consumer) minus the consumer's position: records not
	// yet handed to the application.
	Records int64
}

// ConsumerLag exports the router consumer's lag per partition and its
// rebalances, from the statistics its client reports every interval. The
// router's client is replaced after a fatal error: the series follow
// whichever reported last, and the rebalance count keeps rising. Observe is
// safe for concurrent use with collection.
type ConsumerLag struct {
	mu   sync.Mutex
	last ConsumerStats
	// The rebalance counter: base carries the counts of clients replaced
	// (seen as a count going down), raw the current client's.
	base, raw int64
}

var (
	consumerLagDesc = prometheus.NewDesc("switchboard_router_consumer_lag_records",
		"Records of a partition the router has been assigned that its consumer has not yet read (the partition's last stable offset minus the consumer's position), from the client's statistics.",
		[]string{"topic", "partition"}, nil)
	rebalancesDesc = prometheus.NewDesc("switchboard_router_rebalances_total",
		"Times the router consumer's assignment changed (partitions assigned or revoked), from the client's statistics.",
		nil, nil)
)

// NewConsumerLag returns a ConsumerLag registered with reg.
func NewConsumerLag(reg prometheus.Registerer) (*ConsumerLag, error) {
	c := &ConsumerLag{}
	if reg == nil {
		return nil, ErrMissingDependency
	}
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("lag: registering metrics: %w", err)
	}
	return c, nil
}

// Observe replaces what the series say with st.
func (c *ConsumerLag) Observe(st ConsumerStats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.Rebalances < c.raw {
		c.base += c.raw
	}
	c.raw = st.Rebalances
	c.last = st
}

// Describe implements prometheus.Collector.
func (c *ConsumerLag) Describe(ch chan<- *prometheus.Desc) {
	ch <- consumerLagDesc
	ch <- rebalancesDesc
}

// Collect implements prometheus.Collector.
func (c *ConsumerLag) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	parts, rebalances := c.last.Partitions, c.base+c.raw
	c.mu.Unlock()
	for _, p := range parts {
		ch <- prometheus.MustNewConstMetric(consumerLagDesc, prometheus.GaugeValue, float64(p.Records), p.Topic, strconv.Itoa(int(p.Partition)))
	}
	ch <- prometheus.MustNewConstMetric(rebalancesDesc, prometheus.CounterValue, float64(rebalances))
}
