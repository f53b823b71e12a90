package lag

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The agents' metrics. They are collected from the Sampler's last sample:
// the lag series of an agent exist only while its group exists and was
// sampled, so that a missing group never reads as no lag.
var (
	agentLagDesc = prometheus.NewDesc("switchboard_agent_lag_records",
		"AgentRequests the agent's consumer group has not consumed (end offsets minus committed offsets, summed over its topic's partitions), at the last sample; absent while the group is missing (see switchboard_agent_group_state).",
		[]string{"agent"}, nil)
	agentAgeDesc = prometheus.NewDesc("switchboard_agent_lag_seconds",
		"Age (now minus record timestamp) of the oldest AgentRequest the agent's consumer group has not consumed, at the last sample; 0 when it has consumed everything.",
		[]string{"agent"}, nil)
	agentMembersDesc = prometheus.NewDesc("switchboard_agent_group_members",
		"Members of the agent's consumer group at the last sample (0: nobody consumes its requests).",
		[]string{"agent"}, nil)
	agentStateDesc = prometheus.NewDesc("switchboard_agent_group_state",
		"The agent's consumer group at the last sample: 1 for its state (unknown, stable, empty, rebalancing, missing, error), 0 for the others.",
		[]string{"agent", "state"}, nil)
	routerBacklogDesc = prometheus.NewDesc("switchboard_router_backlog_records",
		"IntentRequests on the requests topic that the router's consumer group has not consumed (end offsets minus committed offsets, summed over the partitions), at the last sample: the same on every instance; absent while the group is missing or the sample failed.",
		nil, nil)
	routerBacklogAgeDesc = prometheus.NewDesc("switchboard_router_backlog_seconds",
		"Age (now minus record timestamp) of the oldest IntentRequest the router's consumer group has not consumed, at the last sample; 0 when it has consumed everything. It includes up to one commit interval of requests already read but not yet committed. The API's admission reads it (http.admission).",
		nil, nil)
	agentSampledDesc = prometheus.NewDesc("switchboard_agent_lag_sampled_timestamp_seconds",
		"When the agent's lag was last sampled (unix seconds).",
		[]string{"agent"}, nil)
)

// agentCollector exports a Sampler's last sample.
type agentCollector struct{ s *Sampler }

func (c *agentCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{agentLagDesc, agentAgeDesc, agentMembersDesc, agentStateDesc, agentSampledDesc, routerBacklogDesc, routerBacklogAgeDesc} {
		ch <- d
	}
}

func (c *agentCollector) Collect(ch chan<- prometheus.Metric) {
	c.s.mu.RLock()
	latest, own := c.s.latest, c.s.latestOwn
	c.s.mu.RUnlock()
	if c.s.router != nil && own.HasLag() {
		ch <- prometheus.MustNewConstMetric(routerBacklogDesc, prometheus.GaugeValue, float64(own.Records))
		if own.HasAge {
			ch <- prometheus.MustNewConstMetric(routerBacklogAgeDesc, prometheus.GaugeValue, own.OldestAge.Seconds())
		}
	}
	for _, g := range c.s.groups {
		a := latest[g.Agent]
		for _, st := range States {
			v := 0.0
			if a.State == st {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(agentStateDesc, prometheus.GaugeValue, v, g.Agent, string(st))
		}
		if !a.SampledAt.IsZero() {
			ch <- prometheus.MustNewConstMetric(agentSampledDesc, prometheus.GaugeValue, float64(a.SampledAt.UnixMilli())/1e3, g.Agent)
		}
		if !a.HasLag() {
			continue
		}
		ch <- prometheus.MustNewConstMetric(agentLagDesc, prometheus.GaugeValue, float64(a.Records), g.Agent)
		ch <- prometheus.MustNewConstMetric(agentMembersDesc, prometheus.GaugeValue, float64(a.Members), g.Agent)
		if a.HasAge {
			ch <- prometheus.MustNewConstMetric(agentAgeDesc, prometheus.GaugeValue, a.OldestAge.Seconds(), g.Agent)
		}
	}
}
