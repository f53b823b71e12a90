package bench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// msDuration prints milliseconds as a Go duration.
func msDuration(v float64) string { return time.Duration(v * float64(time.Millisecond)).String() }

// fmtMs prints a latency in ms with about three significant digits.
func fmtMs(v float64) string {
	d := 0
	switch {
	case v < 1:
		d = 3
	case v < 10:
		d = 2
	case v < 100:
		d = 1
	}
	return strconv.FormatFloat(v, 'f', d, 64)
}

func (r *benchReport) writeTable(w io.Writer) {
	m := r.Machine
	fmt.Fprintf(w, "switchboard bench, %s\n", r.Date)
	fmt.Fprintf(w, "machine  %d × %s, %d GiB, %s, Linux %s, %s\n", m.CPUs, m.Model, m.MemGiB, m.OS, m.Kernel, m.Go)
	eos := ""
	if r.CommitIntervalMs > 0 {
		eos = fmt.Sprintf(" (commit interval %sms)", fmtMs(r.CommitIntervalMs))
	}
	fmt.Fprintf(w, "kafka    %s, %s%s, %d partitions, %s records, linger.ms %s\n", r.Brokers, r.Delivery, eos, r.Partitions, r.Encoding, r.LingerMs)
	load := fmt.Sprintf("%v intents/s for %vs", r.RatePerS, r.DurationS)
	if s := r.StepUp; s != nil {
		load = fmt.Sprintf("step-up from %v/s by %v/s every %vs until p99 > %sms or lag > %s (at most %v/s)",
			s.StartRate, s.Step, s.StepDurationS, fmtMs(s.MaxP99Ms), map[bool]string{true: "1s of the rate", false: strconv.FormatInt(s.MaxLag, 10)}[s.MaxLag == 0], s.MaxRate)
	}
	fmt.Fprintf(w, "load     %s, open loop; agent service time %s, ignore %v, errors %v; intent timeout %s; payload ~%d B\n\n",
		load, msDuration(r.ServiceTimeMs), r.IgnoreRate, r.ErrorRate, msDuration(r.TimeoutMs), r.PayloadBytes)

	phases := []*phaseReport{r.Router}
	names := []string{phaseRouter}
	if r.Baseline != nil {
		phases, names = append(phases, r.Baseline), append(names, phaseBaseline)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(label string, f func(p *phaseReport) string) {
		cells := []string{label}
		for _, p := range phases {
			cells = append(cells, f(p))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	row("", func(p *phaseReport) string { return names[slices.Index(phases, p)] })
	row("offered (intents/s)", func(p *phaseReport) string { return strconv.FormatFloat(p.OfferedPerS, 'f', -1, 64) })
	row("achieved (results/s)", func(p *phaseReport) string { return strconv.FormatFloat(p.AchievedPerS, 'f', -1, 64) })
	if r.StepUp != nil {
		row("knee (intents/s)", func(p *phaseReport) string { return strconv.FormatFloat(*p.KneePerS, 'f', -1, 64) })
	}
	row("sent", func(p *phaseReport) string { return strconv.FormatInt(p.Sent, 10) })
	row("results", func(p *phaseReport) string { return strconv.FormatInt(p.Results, 10) })
	row("missing", func(p *phaseReport) string { return strconv.FormatInt(p.Missing, 10) })
	if r.Router.SendErrors > 0 || (r.Baseline != nil && r.Baseline.SendErrors > 0) {
		row("send errors", func(p *phaseReport) string { return strconv.FormatInt(p.SendErrors, 10) })
	}
	if r.Router.Duplicates > 0 || (r.Baseline != nil && r.Baseline.Duplicates > 0) {
		row("duplicate results", func(p *phaseReport) string { return strconv.FormatInt(p.Duplicates, 10) })
	}
	var outcomes []string
	for _, p := range phases {
		for o := range p.Outcomes {
			if !slices.Contains(outcomes, o) {
				outcomes = append(outcomes, o)
			}
		}
	}
	slices.Sort(outcomes)
	for _, o := range outcomes {
		row("outcome "+o, func(p *phaseReport) string { return strconv.FormatInt(p.Outcomes[o], 10) })
	}
	row("peak pending (router gauge)", func(p *phaseReport) string {
		if p.PeakPending == nil {
			return "-"
		}
		return strconv.FormatInt(*p.PeakPending, 10)
	})
	row("fetch paused (share of samples)", func(p *phaseReport) string {
		if p.FetchPaused == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", *p.FetchPaused*100)
	})
	row("peak in flight", func(p *phaseReport) string { return strconv.FormatInt(p.PeakInFlight, 10) })
	row("broker requests per intent", func(p *phaseReport) string {
		b := p.BrokerPerIntent
		if b == nil {
			return "-"
		}
		return fmt.Sprintf("%.2f (produce %.2f, fetch %.2f, txn %.2f, other %.2f)", b.Requests, b.Produce, b.Fetch, b.Txn, b.Other)
	})
	row("records / bytes produced per intent", func(p *phaseReport) string {
		if b := p.BrokerPerIntent; b != nil {
			return fmt.Sprintf("%.2f / %.0f", b.Records, b.Bytes)
		}
		return "-"
	})
	row("process CPU (cores)", func(p *phaseReport) string { return strconv.FormatFloat(p.ProcessCPUCores, 'f', 2, 64) })
	row("host CPU busy", func(p *phaseReport) string { return fmt.Sprintf("%.0f%%", p.HostCPUBusy*100) })
	row("RSS at start / peak (MiB)", func(p *phaseReport) string {
		return strconv.FormatFloat(p.RSSStartMiB, 'f', 0, 64) + " / " + strconv.FormatFloat(p.RSSPeakMiB, 'f', 0, 64)
	})
	_ = tw.Flush()

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "latency (ms)\t\t%7s %7s %7s %7s %7s %7s\n", "n", "p50", "p90", "p99", "p99.9", "max")
	for i, p := range phases {
		l := p.Latency
		for _, s := range []struct {
			name string
			st   latencyStats
		}{
			{"end to end (record timestamps)", l.EndToEnd},
			{"end to end, observed", l.EndToEndObserved},
			{"request → dispatch (record ts)", l.RequestToDispatch},
			{"response → result (record ts)", l.ResponseToResult},
			{"publish → agent, observed", l.PublishToAgent},
			{"agent → result, observed", l.AgentToResult},
			{"dispatch record → agent read", l.DispatchToAgent},
			{"result record → caller read", l.ResultToCaller},
			{"generator lag", l.GeneratorLag},
			{"in router, request (µs histogram)", l.InRouterRequest},
			{"in router, response (µs histogram)", l.InRouterResponse},
		} {
			if s.st.N == 0 && strings.HasPrefix(s.name, "in router") {
				continue // the baseline has no router
			}
			fmt.Fprintf(tw, "%s\t%s\t%7d %7s %7s %7s %7s %7s\n", names[i], s.name, s.st.N,
				fmtMs(s.st.P50), fmtMs(s.st.P90), fmtMs(s.st.P99), fmtMs(s.st.P999), fmtMs(s.st.Max))
		}
		if len(p.ByOutcome) > 1 {
			for _, o := range slices.Sorted(maps.Keys(p.ByOutcome)) {
				st := p.ByOutcome[o]
				fmt.Fprintf(tw, "%s\t%s\t%7d %7s %7s %7s %7s %7s\n", names[i], "end to end, "+o, st.N,
					fmtMs(st.P50), fmtMs(st.P90), fmtMs(st.P99), fmtMs(st.P999), fmtMs(st.Max))
			}
		}
	}
	_ = tw.Flush()

	for i, p := range phases {
		if len(p.Steps) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nstep-up (%s): knee %v intents/s; stopped: %s\n", names[i], *p.KneePerS, p.StopReason)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "rate/s\tsent\tresults\tachieved/s\tp99 ms (observed)\twithout result\theld\tits intents' p50/p99 ms\t")
		for _, s := range p.Steps {
			held := map[bool]string{true: "yes", false: "no"}[s.Held]
			if s.Repeat {
				held += " (repeat)"
			}
			fmt.Fprintf(tw, "%v\t%d\t%d\t%.0f\t%s\t%d\t%s\t%s / %s\t\n", s.Rate, s.Released, s.Results, s.Achieved, fmtMs(s.LiveP99Ms), s.Lag,
				held, fmtMs(s.SentP50Ms), fmtMs(s.SentP99Ms))
		}
		_ = tw.Flush()
	}

	fmt.Fprintln(w)
	if r.Fraction != nil {
		fmt.Fprintf(w, "router throughput / baseline: %.2f (of the %s rates)\n", *r.Fraction, map[string]string{"knee": "knee", "achieved": "achieved"}[r.FractionBasis])
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}
