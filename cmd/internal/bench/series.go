package bench

import (
	"math"
	"time"
)

// secondReport is one second of a fixed-rate load, by when its intents were
// sent: their observed end to end, the p99 of each hop, how late the
// generator was, and what the router's Kafka clients reported meanwhile. It
// says whether a tail is spread over the run or comes in bursts, and which
// hop carries a burst. Latencies are in milliseconds.
type secondReport struct {
	S            int     `json:"s"` // seconds since the load started
	Sent         int64   `json:"sent"`
	Results      uint64  `json:"results"`
	E2EP50       float64 `json:"end_to_end_observed_p50"`
	E2EP99       float64 `json:"end_to_end_observed_p99"`
	ReqDispP99   float64 `json:"request_to_dispatch_p99"` // record timestamps: 1 ms resolution
	DispAgentP99 float64 `json:"dispatch_to_agent_p99"`
	RespResP99   float64 `json:"response_to_result_p99"` // record timestamps: 1 ms resolution
	ResCallerP99 float64 `json:"result_to_caller_p99"`
	GenLagMax    float64 `json:"generator_lag_max"`
	// The highest p99, over the router's clients and their brokers, of
	// librdkafka's statistics reported during the second (rtt: a request's
	// round trip; int_latency: a record's wait in the producer's queue
	// before it is put in a request; outbuf_latency: a request's wait
	// before it is written to the socket).
	RTTP99    float64 `json:"client_rtt_p99,omitempty"`
	IntLatP99 float64 `json:"client_int_latency_p99,omitempty"`
	OutbufP99 float64 `json:"client_outbuf_latency_p99,omitempty"`
}

// settleTime is how long after the load's start the settled end-to-end
// figure begins (latencies.EndToEndObservedSettled).
const settleTime = 2 * time.Second

// maxSeriesSeconds bounds the per-second series (about 160 KiB of
// histograms a second): a longer fixed-rate run reports its first
// maxSeriesSeconds.
const maxSeriesSeconds = 600

// Per-second hops, in the order of secondHists.
const (
	sE2E = iota
	sReqDisp
	sDispAgent
	sRespRes
	sResCaller
	nSeries
)

// secondHists are one second's histograms, all in milliseconds.
type secondHists struct {
	h      [nSeries]histogram
	sent   int64
	lagMax int64 // µs
}

// series gathers the per-second figures while report walks the rows.
type series struct {
	startUs int64
	secs    []*secondHists
}

func newSeries(startUs int64) *series { return &series{startUs: startUs} }

// at is the histograms of the second in which sentUs falls; nil outside the
// series.
func (s *series) at(sentUs int64) *secondHists {
	i := (sentUs - s.startUs) / 1e6
	if i < 0 || i >= maxSeriesSeconds {
		return nil
	}
	for int64(len(s.secs)) <= i {
		s.secs = append(s.secs, nil)
	}
	if s.secs[i] == nil {
		s.secs[i] = &secondHists{}
	}
	return s.secs[i]
}

// report summarises the series, with the clients' statistics of each second.
func (s *series) report(samples []clientLatency, epochUs int64) []secondReport {
	out := make([]secondReport, 0, len(s.secs))
	for i, sh := range s.secs {
		if sh == nil {
			continue
		}
		q := func(k int) float64 { return float64(sh.h[k].quantile(0.99)) }
		sr := secondReport{
			S: i, Sent: sh.sent, Results: sh.h[sE2E].count(), E2EP50: float64(sh.h[sE2E].quantile(0.5)), E2EP99: q(sE2E),
			ReqDispP99: q(sReqDisp), DispAgentP99: q(sDispAgent), RespResP99: q(sRespRes), ResCallerP99: q(sResCaller),
			GenLagMax: ms(sh.lagMax),
		}
		from, to := s.startUs+int64(i)*1e6, s.startUs+int64(i+1)*1e6
		for _, c := range samples {
			if at := c.At.UnixMicro() - epochUs; at >= from && at < to {
				sr.RTTP99, sr.IntLatP99, sr.OutbufP99 = max(sr.RTTP99, c.RTT), max(sr.IntLatP99, c.IntLat), max(sr.OutbufP99, c.Outbuf)
			}
		}
		out = append(out, sr)
	}
	return out
}

// clientLatency is one statistics event's highest p99s over its brokers, in
// milliseconds.
type clientLatency struct {
	At                  time.Time
	RTT, IntLat, Outbuf float64
}

// windowP99 is librdkafka's rolling-window latency statistics (µs).
type windowP99 struct {
	P99 int64 `json:"p99"`
	Cnt int64 `json:"cnt"`
}

func (w windowP99) ms() float64 {
	if w.Cnt == 0 {
		return 0
	}
	return math.Round(float64(w.P99)) / 1000
}
