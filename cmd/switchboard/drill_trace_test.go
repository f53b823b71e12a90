//go:build integration && linux

package main

// The drill's optional trace (DRILL_TRACE=file): once a second, each
// router's agent answer-time estimate, in-flight count and shed counters
// from its /metrics; at the end, the events and, per second of sending, how
// the intents sent in it ended. It shows which phase shed intents fall in
// and what the estimate stood at then (BENCHMARKS.md, issue 16 item 4).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"
)

// drillTraced are the /metrics series the trace keeps (the drill's agent).
var drillTraced = map[string]string{
	`switchboard_agent_answer_latency_seconds{agent="drill"}`:          "latency_s",
	`switchboard_agent_in_flight{agent="drill"}`:                       "in_flight",
	`switchboard_agent_queued{agent="drill"}`:                          "queued",
	`switchboard_intents_shed_total{agent="drill",cause="late"}`:       "shed_late",
	`switchboard_intents_shed_total{agent="drill",cause="queue_full"}`: "shed_queue_full",
}

var apiListening = regexp.MustCompile(`msg="api listening" addr=(\S+)`)

// traceRouters scrapes the routers' /metrics once a second into w until ctx
// is done. A router down (killed, restarting) is skipped that second.
func traceRouters(ctx context.Context, w io.Writer, from time.Time, routers []*proc) {
	client := &http.Client{Timeout: 500 * time.Millisecond}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, r := range routers {
			m := apiListening.FindAllStringSubmatch(r.log(), -1)
			if len(m) == 0 {
				continue
			}
			line := scrapeTraced(ctx, client, "http://"+m[len(m)-1][1]+"/metrics")
			if line == "" {
				continue
			}
			fmt.Fprintf(w, "metrics t=%.1f router=%s %s\n", time.Since(from).Seconds(), r.name, line)
		}
	}
}

func scrapeTraced(ctx context.Context, client *http.Client, url string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return ""
	}
	resp, err := client.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	got := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if key, traced := drillTraced[name]; ok && traced {
			got[key] = value
		}
	}
	if len(got) == 0 {
		return ""
	}
	var b strings.Builder
	for _, k := range []string{"latency_s", "in_flight", "queued", "shed_late", "shed_queue_full"} {
		v, ok := got[k]
		if !ok {
			v = "-"
		}
		fmt.Fprintf(&b, "%s=%s ", k, v)
	}
	return strings.TrimSpace(b.String())
}

// traceOutcomes writes, per second of sending (from loadFrom, unix ms), how
// many intents were sent and how they ended: answered within the deadline,
// answered late, a fallback, shed, other or none.
func traceOutcomes(w io.Writer, ins []drillIntent, deadline time.Duration, loadFrom int64) {
	type sec struct{ sent, inTime, late, fallback, shed, other int }
	var secs []sec
	for _, in := range ins {
		i := int(max(0, (in.sentMs-loadFrom)/1000))
		for len(secs) <= i {
			secs = append(secs, sec{})
		}
		s := &secs[i]
		s.sent++
		switch in.outcome {
		case "answered":
			if in.seenMs > 0 && in.seenMs-in.sentMs <= deadline.Milliseconds() {
				s.inTime++
			} else {
				s.late++
			}
		case "fallback_static", "fallback_cache", "timed_out":
			s.fallback++
		case "shed":
			s.shed++
		default:
			s.other++
		}
	}
	for i, s := range secs {
		fmt.Fprintf(w, "sent t=%d n=%d in_deadline=%d late=%d fallback=%d shed=%d other=%d\n", i, s.sent, s.inTime, s.late, s.fallback, s.shed, s.other)
	}
}

// openTrace opens DRILL_TRACE's file; nil when it is not set.
func openTrace() (*os.File, error) {
	p := os.Getenv("DRILL_TRACE")
	if p == "" {
		return nil, nil
	}
	return os.Create(p)
}
