package router

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// unknownType labels records whose intent type is not configured, so a bad
// producer cannot create unbounded label values.
const unknownType = "_unknown"

type metrics struct {
	received        *prometheus.CounterVec
	dispatched      *prometheus.CounterVec
	resolved        *prometheus.CounterVec
	resolveSeconds  *prometheus.HistogramVec
	timeouts        *prometheus.CounterVec
	pending         prometheus.Gauge
	lateResponses   *prometheus.CounterVec
	dupResponses    prometheus.Counter
	unknownResp     prometheus.Counter
	progress        prometheus.Counter
	dupIntents      prometheus.Counter
	deadLettered    *prometheus.CounterVec
	deliveryFailed  prometheus.Counter
	paused          prometheus.Gauge
	uncommitted     prometheus.Gauge
	fallbackEntries prometheus.Gauge
	moved           *prometheus.CounterVec
	restored        prometheus.Counter
	restoreSeconds  prometheus.Histogram
	transactions    *prometheus.CounterVec
	commitSeconds   prometheus.Histogram
	dispatchWait    prometheus.Histogram // a commit's wait for the dispatches sent at once
	committed       prometheus.Counter   // transactions{result="committed"}, resolved once
	// Group commit's batch sizes: records consumed and outputs produced by
	// one committed transaction.
	txRecords, txOutputs prometheus.Histogram
	recordSeconds        *prometheus.HistogramVec
	revokedSkipped       prometheus.Counter
	// The two series of recordSeconds, resolved once: observed per record.
	requestSeconds, responseSeconds prometheus.Observer
	circuitState                    *prometheus.GaugeVec
	agentInFlight                   *prometheus.GaugeVec
	agentQueued                     *prometheus.GaugeVec
	retries                         *prometheus.CounterVec
	cancels                         *prometheus.CounterVec
	staleResponses                  prometheus.Counter
	invalidResponses                *prometheus.CounterVec
	pendingBytes                    prometheus.Gauge
	tenantShed                      prometheus.Counter
	statesSkipped                   prometheus.Counter // at_least_once: states never written (persist.go)
	prog                            *progressMetrics   // progress.go
	overloadMetrics                                    // overload.go
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_intents_received_total", Help: "Intent requests consumed, by intent type.",
		}, []string{"intent_type"}),
		dispatched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_intents_dispatched_total", Help: "Intents dispatched to an agent's topic, by agent.",
		}, []string{"agent"}),
		resolved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_intents_resolved_total", Help: "Intents resolved, by intent type and outcome.",
		}, []string{"intent_type", "outcome"}),
		resolveSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchboard_intent_resolve_duration_seconds",
			Help:    "Time from the request record's timestamp to resolution, by intent type and outcome.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"intent_type", "outcome"}),
		timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_intent_timeouts_total", Help: "Timeout events published, by intent type and reason.",
		}, []string{"intent_type", "reason"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_intents_pending", Help: "Intents dispatched and not yet resolved.",
		}),
		lateResponses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_responses_late_total", Help: "Agent responses that arrived after their intent was resolved (they refresh the fallback cache).",
		}, []string{"intent_type"}),
		dupResponses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_responses_duplicate_total", Help: "Agent responses for an intent already answered (ignored).",
		}),
		unknownResp: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_responses_unknown_total", Help: "Agent responses for an intent this instance does not know.",
		}),
		progress: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_responses_progress_total", Help: "Agent progress messages received.",
		}),
		dupIntents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_intents_duplicate_total", Help: "Intent requests whose id was already pending or recently resolved (not dispatched again).",
		}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_records_dead_lettered_total", Help: "Records copied to the dead-letter topic, by source topic and error class.",
		}, []string{"topic", "class"}),
		deliveryFailed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_delivery_failures_total", Help: "Outputs the broker did not acknowledge; their source offsets are not committed.",
		}),
		paused: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_fetch_paused", Help: "1 while the router has paused fetching (back-pressure), else 0.",
		}),
		uncommitted: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_records_uncommitted", Help: "Consumed records whose offsets are not yet committable.",
		}),
		fallbackEntries: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_fallback_cache_entries", Help: "Answers held in the fallback cache.",
		}),
		moved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_records_moved_total", Help: "Records produced with another partitioner than murmur2, moved to the partition their key hashes to.",
		}, []string{"topic"}),
		revokedSkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_records_skipped_revoked_total", Help: "Records read before their partition was revoked and handled after: skipped, for the partition's new owner reads them again.",
		}),
		restored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_intents_restored_total", Help: "Pending intents restored from the changelog when partitions were taken over.",
		}),
		restoreSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "switchboard_restore_duration_seconds", Help: "Time to take over partitions: committed offsets and the pending changelog read.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		transactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_transactions_total", Help: "Kafka transactions (exactly_once), by result: committed or aborted.",
		}, []string{"result"}),
		recordSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "switchboard_router_record_seconds",
			Help: "The router's own share of a record's latency: from the poll that read it to when everything it caused (dispatch, result, changelog) was handed to the producer; Kafka's hops are not in it. By topic: requests or responses.",
			// 5 µs to 10.5 s: a router that has fallen behind holds records
			// for seconds, and its p99 must read that, not the top bucket.
			Buckets: prometheus.ExponentialBuckets(5e-6, 2, 22),
		}, []string{"topic"}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "switchboard_transaction_commit_duration_seconds", Help: "Time to send offsets and commit one transaction.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		dispatchWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "switchboard_transaction_dispatch_wait_seconds", Help: "Time a commit waited for the broker to acknowledge the dispatches sent at once, outside the transaction, since the last commit (exactly_once).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		txRecords: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "switchboard_transaction_records", Help: "Records consumed (requests and responses) whose offsets one committed transaction carries: the group commit's batch size.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14),
		}),
		txOutputs: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "switchboard_transaction_outputs", Help: "Records produced (results, changelog, timeouts) in one committed transaction; dispatches go out at once, outside it.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 16),
		}),
		circuitState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_agent_circuit_state", Help: "An agent's circuit breaker: 0 closed, 1 open, 2 half-open (only agents with a breaker).",
		}, []string{"agent"}),
		agentInFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_agent_in_flight", Help: "Intents dispatched to an agent and not yet resolved or retried.",
		}, []string{"agent"}),
		agentQueued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_agent_queued", Help: "Intents waiting in an agent's admission queue.",
		}, []string{"agent"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_intent_retries_total", Help: "Retries scheduled after a retryable agent error, by intent type.",
		}, []string{"intent_type"}),
		cancels: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_cancels_total", Help: "Cancel records read, by result: cancelled (a pending intent resolved cancelled), ignored (unknown or already resolved) or forbidden (another tenant's intent).",
		}, []string{"result"}),
		staleResponses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_responses_stale_total", Help: "Agent errors from an attempt already retried, or for an intent not in flight (ignored).",
		}),
		invalidResponses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_responses_invalid_total", Help: "Agent responses dead-lettered (invalid_response) rather than credited, by reason: agent (another agent than the one the intent was dispatched to), tenant (a tenant without an intent of that id), attempt (an attempt never dispatched), ambiguous (no tenant, and several tenants have an intent of that id).",
		}, []string{"reason"}),
		pendingBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_intents_pending_bytes", Help: "Bytes the pending intents hold (payloads and other fields), against router.max_pending_bytes.",
		}),
		tenantShed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_intents_tenant_budget_shed_total", Help: "Intents shed at once because their tenant's pending intents held router.max_pending_bytes_per_tenant.",
		}),
		statesSkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_pending_states_skipped_total", Help: "at_least_once: intents resolved within commit_interval of their last unwritten pending state, which was never written (the resolution marker went instead).",
		}),
	}
	for _, c := range []prometheus.Collector{
		m.received, m.dispatched, m.resolved, m.resolveSeconds, m.timeouts, m.pending,
		m.lateResponses, m.dupResponses, m.unknownResp, m.progress, m.dupIntents, m.deadLettered, m.deliveryFailed,
		m.paused, m.uncommitted, m.fallbackEntries, m.moved, m.revokedSkipped, m.restored, m.restoreSeconds, m.transactions, m.commitSeconds, m.dispatchWait, m.txRecords, m.txOutputs, m.recordSeconds,
		m.circuitState, m.agentInFlight, m.agentQueued, m.retries, m.cancels, m.staleResponses,
		m.invalidResponses, m.pendingBytes, m.tenantShed, m.statesSkipped,
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.committed = m.transactions.WithLabelValues("committed")
	var err error
	if m.prog, err = newProgressMetrics(reg); err != nil {
		return nil, err
	}
	if m.overloadMetrics, err = newOverloadMetrics(reg); err != nil {
		return nil, err
	}
	m.requestSeconds = m.recordSeconds.WithLabelValues("requests")
	m.responseSeconds = m.recordSeconds.WithLabelValues("responses")
	return m, nil
}

// routeMetrics are one intent type's series, resolved once so the hot path
// does no label lookups.
type routeMetrics struct {
	received   prometheus.Counter
	dispatched prometheus.Counter
	late       prometheus.Counter
	retries    prometheus.Counter
	resolved   map[schemas.Outcome]prometheus.Counter
	seconds    map[schemas.Outcome]prometheus.Observer
	timeouts   map[schemas.TimeoutReason]prometheus.Counter
}

func (m *metrics) forRoute(intentType, agent string) *routeMetrics {
	rm := &routeMetrics{
		received: m.received.WithLabelValues(intentType),
		late:     m.lateResponses.WithLabelValues(intentType),
		retries:  m.retries.WithLabelValues(intentType),
		resolved: map[schemas.Outcome]prometheus.Counter{},
		seconds:  map[schemas.Outcome]prometheus.Observer{},
		timeouts: map[schemas.TimeoutReason]prometheus.Counter{},
	}
	if agent != "" {
		rm.dispatched = m.dispatched.WithLabelValues(agent)
	}
	for _, o := range intents.Outcomes {
		rm.resolved[o] = m.resolved.WithLabelValues(intentType, string(o))
		rm.seconds[o] = m.resolveSeconds.WithLabelValues(intentType, string(o))
	}
	for _, r := range []schemas.TimeoutReason{schemas.ReasonDeadline, schemas.ReasonExpiredOnArrival, schemas.ReasonIdle, schemas.ReasonCircuitOpen, schemas.ReasonShed} {
		rm.timeouts[r] = m.timeouts.WithLabelValues(intentType, string(r))
	}
	return rm
}

// registerPendingLimit exports router.max_pending beside
// switchboard_intents_pending, so that an alert or a dashboard can say how
// near the router is to pausing its intake.
func registerPendingLimit(reg prometheus.Registerer, limit int) error {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "switchboard_intents_pending_limit",
		Help: "router.max_pending: at this many pending intents the router pauses fetching requests (and resumes below 90% of it).",
	})
	g.Set(float64(limit))
	return reg.Register(g)
}
