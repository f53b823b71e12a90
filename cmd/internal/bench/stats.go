package bench

import (
	"context"
	"encoding/json"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// brokerStats keeps the latest librdkafka statistics of each of a phase's
// router clients (the router's consumer and producers, or the baseline's
// forwarders: those built from the phase's settings that report them), so
// that the bench can say what each intent cost the broker in requests,
// records and bytes. The generator, the agent and the readers are not in it.
type brokerStats struct {
	mu   sync.Mutex
	last map[string]clientStats // by librdkafka client name
	// latency is every event's highest p99s (rtt, int_latency,
	// outbuf_latency) over its brokers, for the per-second series; at most
	// maxLatencySamples are kept.
	latency []clientLatency
}

// maxLatencySamples bounds brokerStats.latency: some four clients reporting
// twice a second for maxSeriesSeconds.
const maxLatencySamples = 8 * maxSeriesSeconds

// clientStats are a client's cumulative counters.
type clientStats struct {
	Req     map[string]int64 // requests sent, by request type (Produce, Fetch, EndTxn, ...)
	TxBytes int64            // bytes sent to brokers
	TxMsgs  int64            // records produced
}

// statsInterval is how often the clients report (statistics.interval.ms).
const statsInterval = 500 * time.Millisecond

// add takes one statistics event (JSON).
func (b *brokerStats) add(js string) {
	var s struct {
		Name    string `json:"name"`
		TxMsgs  int64  `json:"txmsgs"`
		Brokers map[string]struct {
			TxBytes int64            `json:"txbytes"`
			Req     map[string]int64 `json:"req"`
			RTT     windowP99        `json:"rtt"`
			IntLat  windowP99        `json:"int_latency"`
			Outbuf  windowP99        `json:"outbuf_latency"`
		} `json:"brokers"`
	}
	if json.Unmarshal([]byte(js), &s) != nil {
		return
	}
	c := clientStats{Req: map[string]int64{}, TxMsgs: s.TxMsgs}
	l := clientLatency{At: time.Now()}
	for _, br := range s.Brokers {
		c.TxBytes += br.TxBytes
		for k, v := range br.Req {
			c.Req[k] += v
		}
		l.RTT, l.IntLat, l.Outbuf = max(l.RTT, br.RTT.ms()), max(l.IntLat, br.IntLat.ms()), max(l.Outbuf, br.Outbuf.ms())
	}
	b.mu.Lock()
	if b.last == nil {
		b.last = map[string]clientStats{}
	}
	b.last[s.Name] = c
	if len(b.latency) < maxLatencySamples {
		b.latency = append(b.latency, l)
	}
	b.mu.Unlock()
}

// total sums the clients' latest counters.
func (b *brokerStats) total() clientStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := clientStats{Req: map[string]int64{}}
	for _, c := range b.last {
		t.TxBytes += c.TxBytes
		t.TxMsgs += c.TxMsgs
		for k, v := range c.Req {
			t.Req[k] += v
		}
	}
	return t
}

// latencies is a copy of the statistics events' latency samples so far.
func (b *brokerStats) latencies() []clientLatency {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]clientLatency(nil), b.latency...)
}

// sub is what c counted since before.
func (c clientStats) sub(before clientStats) clientStats {
	d := clientStats{Req: maps.Clone(c.Req), TxBytes: c.TxBytes - before.TxBytes, TxMsgs: c.TxMsgs - before.TxMsgs}
	for k, v := range before.Req {
		d.Req[k] -= v
	}
	return d
}

// brokerCost is what one intent cost the broker, from the router's (or the
// forwarders') clients: requests by kind, records produced, bytes sent.
type brokerCost struct {
	Requests float64 `json:"requests"`
	Produce  float64 `json:"produce"`
	Fetch    float64 `json:"fetch"`
	// Txn: AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn.
	Txn     float64 `json:"txn"`
	Other   float64 `json:"other"` // heartbeats, offset commits, metadata, ...
	Records float64 `json:"records_produced"`
	Bytes   float64 `json:"bytes_sent"`
}

func (c clientStats) perIntent(n int64) *brokerCost {
	if n <= 0 {
		return nil
	}
	f := float64(n)
	bc := &brokerCost{Records: float64(c.TxMsgs) / f, Bytes: float64(c.TxBytes) / f}
	for k, v := range c.Req {
		x := float64(v) / f
		bc.Requests += x
		switch k {
		case "Produce":
			bc.Produce += x
		case "Fetch":
			bc.Fetch += x
		case "AddPartitionsToTxn", "AddOffsetsToTxn", "TxnOffsetCommit", "EndTxn":
			bc.Txn += x
		default:
			bc.Other += x
		}
	}
	return bc
}

// settleStats waits for one more statistics interval (the clients' counters
// then include the drain) and returns the total.
func (ph *phase) settleStats(ctx context.Context) clientStats {
	select {
	case <-ctx.Done():
	case <-ph.clock.After(statsInterval + 100*time.Millisecond):
	}
	return ph.stats.total()
}

func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// gaugeValues reads the gauges of g that have one series.
func gaugeValues(g prometheus.Gatherer) map[string]float64 {
	out := map[string]float64{}
	mfs, err := g.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		if ms := mf.GetMetric(); len(ms) == 1 && ms[0].GetGauge() != nil {
			out[mf.GetName()] = ms[0].GetGauge().GetValue()
		}
	}
	return out
}
