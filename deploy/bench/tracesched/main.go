// Command tracesched reads an execution trace written by 'switchboard bench
// --trace' (or any Go program's runtime/trace) and prints, per goroutine,
// how its time was spent: running, in a system or cgo call, runnable
// (ready, waiting for a P) and waiting (blocked), with why it last became
// runnable. The router's poll goroutine and event loop are named POLL and
// LOOP; other goroutines by the outermost and innermost frames of their
// module or of the Kafka client. A goroutine that is runnable most of the
// time is short of CPU, or is queued behind others for a P; one that
// waits in "select" is idle.
//
//	switchboard bench ... --trace /tmp/trace.out
//	cd deploy/bench/tracesched && go run . /tmp/trace.out
//
// It is a module of its own (golang.org/x/exp/trace reads Go 1.26's
// traces; Switchboard's module does not depend on it).
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

// goroutine is one goroutine's time, by state.
type goroutine struct {
	id                                  trace.GoID
	name                                string
	running, syscall, runnable, waiting time.Duration
	wakes                               int    // times it became runnable
	hist                                [6]int // its runnable waits: <10us, <100us, <1ms, <10ms, <100ms, longer
	state                               trace.GoState
	since                               trace.Time
	blockedOn                           string                   // why it last blocked
	waitingOn                           map[string]time.Duration // blocked time, by reason
	readyAfter                          string                   // the state and reason it became runnable from
	runnableAfter                       map[string]time.Duration
	runnableAfterN                      map[string]int
}

func bucket(d time.Duration) int {
	for i, b := range []time.Duration{10 * time.Microsecond, 100 * time.Microsecond, time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond} {
		if d < b {
			return i
		}
	}
	return 5
}

func short(s string) string {
	if i := strings.LastIndex(s, "/"); i >= 0 {
		return s[i+1:]
	}
	return s
}

// nameOf names a goroutine by a stack it was seen with.
func nameOf(g *goroutine, stk trace.Stack) {
	if g.name == "LOOP" || g.name == "POLL" {
		return
	}
	var frames []string
	for f := range stk.Frames() {
		frames = append(frames, f.Func)
	}
	for _, f := range frames {
		switch {
		case strings.HasSuffix(f, "router.(*Router).loop"):
			g.name = "LOOP"
			return
		case strings.HasSuffix(f, "router.(*Router).poll"):
			g.name = "POLL"
			return
		}
	}
	outer, inner := "", ""
	for i := len(frames) - 1; i >= 0; i-- {
		if strings.Contains(frames[i], "switchboard") || strings.Contains(frames[i], "kafka") {
			if outer == "" {
				outer = frames[i]
			}
			inner = frames[i]
		}
	}
	switch {
	case outer != "":
		g.name = short(outer) + " > " + short(inner)
	case g.name == "" && len(frames) > 0:
		g.name = short(frames[len(frames)-1])
	}
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: tracesched TRACE_FILE")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "tracesched:", err)
		os.Exit(1)
	}
}

func run(path string, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	gs, span, err := analyze(f)
	if err != nil {
		return err
	}
	report(w, gs, span)
	return nil
}

// analyze reads a trace and returns its goroutines' times and its span.
func analyze(in io.Reader) (map[trace.GoID]*goroutine, time.Duration, error) {
	r, err := trace.NewReader(in)
	if err != nil {
		return nil, 0, err
	}
	gs := map[trace.GoID]*goroutine{}
	var first, last trace.Time
	for {
		ev, err := r.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, 0, err
		}
		if first == 0 {
			first = ev.Time()
		}
		last = ev.Time()
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		if st.Resource.Kind != trace.ResourceGoroutine {
			continue
		}
		id := st.Resource.Goroutine()
		from, to := st.Goroutine()
		g := gs[id]
		if g == nil {
			g = &goroutine{
				id: id, state: from, since: ev.Time(), waitingOn: map[string]time.Duration{},
				runnableAfter: map[string]time.Duration{}, runnableAfterN: map[string]int{},
			}
			gs[id] = g
		}
		nameOf(g, st.Stack)
		if ev.Goroutine() == id { // the event's own stack is this goroutine's
			nameOf(g, ev.Stack())
		}
		d := ev.Time().Sub(g.since)
		switch g.state {
		case trace.GoRunning:
			g.running += d
		case trace.GoSyscall:
			g.syscall += d
		case trace.GoRunnable:
			g.runnable += d
			g.hist[bucket(d)]++
			g.wakes++
			g.runnableAfter[g.readyAfter] += d
			g.runnableAfterN[g.readyAfter]++
		case trace.GoWaiting:
			g.waiting += d
			g.waitingOn[g.blockedOn] += d
		}
		switch to {
		case trace.GoRunnable:
			g.readyAfter = from.String() + "/" + st.Reason
		case trace.GoWaiting:
			g.blockedOn = st.Reason
		}
		g.state, g.since = to, ev.Time()
	}
	return gs, last.Sub(first), nil
}

func report(w io.Writer, gs map[trace.GoID]*goroutine, span time.Duration) {
	var all []*goroutine
	var running, runnable time.Duration
	group := map[string]*goroutine{}
	for _, g := range gs {
		all = append(all, g)
		running += g.running
		runnable += g.runnable
		n, _, _ := strings.Cut(g.name, " > ")
		if group[n] == nil {
			group[n] = &goroutine{name: n}
		}
		group[n].running += g.running
		group[n].runnable += g.runnable
		group[n].wakes++ // goroutines, here
	}
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	fmt.Fprintf(w, "trace %v; summed over goroutines: running %v, runnable %v (%.0f runnable on average)\n\n",
		ms(span), ms(running), ms(runnable), runnable.Seconds()/span.Seconds())
	var groups []*goroutine
	for _, g := range group {
		groups = append(groups, g)
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].running > groups[j].running })
	fmt.Fprintf(w, "%-70s %10s %10s %10s\n", "goroutines, by outermost frame", "count", "running", "runnable")
	for i, g := range groups {
		if i == 12 {
			break
		}
		fmt.Fprintf(w, "%-70.70s %10d %10v %10v\n", g.name, g.wakes, ms(g.running), ms(g.runnable))
	}
	sort.Slice(all, func(i, j int) bool { return all[i].running+all[i].runnable > all[j].running+all[j].runnable })
	fmt.Fprintf(w, "\n%-6s %-60s %9s %9s %9s %9s %7s  %s\n", "id", "goroutine", "running", "syscall", "runnable", "waiting", "ready", "runnable waits <10us <100us <1ms <10ms <100ms longer")
	for i, g := range all {
		if i == 20 {
			break
		}
		fmt.Fprintf(w, "%-6d %-60.60s %9v %9v %9v %9v %7d  %v\n", g.id, g.name, ms(g.running), ms(g.syscall), ms(g.runnable), ms(g.waiting), g.wakes, g.hist)
		if g.name != "LOOP" && g.name != "POLL" {
			continue
		}
		for _, k := range sortedKeys(g.waitingOn) {
			fmt.Fprintf(w, "         waiting on %-30q %v\n", k, ms(g.waitingOn[k]))
		}
		for _, k := range sortedKeys(g.runnableAfter) {
			fmt.Fprintf(w, "         runnable after %-26q %v (%d times)\n", k, ms(g.runnableAfter[k]), g.runnableAfterN[k])
		}
	}
}

func sortedKeys(m map[string]time.Duration) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	return keys
}
