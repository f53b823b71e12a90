//go:build integration && linux

package main

// Processes for the chaos test: switchboard serve and agent as child
// processes, each logging to its own file, killed with SIGKILL and started
// again under the same name.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"
)

// proc is one named child process, started again under the same name after
// it dies. Its log file collects every incarnation, each after a header line.
// A proc is used by one goroutine at a time.
type proc struct {
	name    string
	bin     string
	args    []string
	env     []string
	logPath string

	cmd       *exec.Cmd
	done      chan struct{} // closed when the current incarnation has exited
	exitErr   error         // how it exited, once done is closed
	logFrom   int64         // where the current incarnation's log starts
	starts    int
	harnessed bool          // the harness killed or stopped the current incarnation
	cpu       time.Duration // CPU time (user and system) of the incarnations that have exited
}

func (p *proc) start() error {
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // the child has its own copy of the descriptor
	if st, err := f.Stat(); err == nil {
		p.logFrom = st.Size()
	}
	p.starts++
	fmt.Fprintf(f, "--- chaos: %s start #%d at %s: %s %s\n", p.name, p.starts, time.Now().Format("15:04:05.000"), p.bin, strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = f, f
	// A child outlives a test binary that dies (a go test timeout panics
	// without running cleanups): SIGKILL it when the test binary goes.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	p.cmd, p.done, p.exitErr, p.harnessed = cmd, make(chan struct{}), nil, false
	done := p.done
	go func() {
		err := cmd.Wait()
		p.exitErr = err
		if ps := cmd.ProcessState; ps != nil {
			p.cpu += ps.UserTime() + ps.SystemTime()
		}
		close(done)
	}()
	return nil
}

func (p *proc) running() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// exitedOnItsOwn says whether the current incarnation died without the
// harness killing it.
func (p *proc) exitedOnItsOwn() bool { return p.done != nil && !p.running() && !p.harnessed }

// kill9 sends SIGKILL and waits for the process to be gone.
func (p *proc) kill9() error {
	if !p.running() {
		return nil
	}
	p.harnessed = true
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s (pid %d) survived SIGKILL for 30s", p.name, p.cmd.Process.Pid)
	}
}

// stop sends SIGTERM and waits up to grace. A process still running then
// gets SIGQUIT, so that the Go runtime writes every goroutine's stack to its
// log (where it hangs), and SIGKILL if that does not end it. stop says
// whether the process ended by itself within grace.
func (p *proc) stop(grace time.Duration) bool {
	if !p.running() {
		return true
	}
	p.harnessed = true
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return true
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.kill9()
	}
	return false
}

// stacks returns, from the goroutine dump SIGQUIT left at the end of the
// current incarnation's log, the goroutines that run Switchboard's code (the
// whole dump stays in the log).
func (p *proc) stacks() string {
	log := p.current()
	i := strings.Index(log, "\ngoroutine ")
	if i < 0 {
		return "(no goroutine dump in " + p.logPath + ")"
	}
	var keep []string
	for _, g := range strings.Split(log[i+1:], "\n\n") {
		if strings.Contains(g, "github.com/switchboard-mcp/") {
			keep = append(keep, g)
		}
	}
	return strings.Join(keep, "\n\n") + "\n(the whole dump is in " + p.logPath + ")"
}

// log returns the log of every incarnation.
func (p *proc) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// current returns the log of the current incarnation.
func (p *proc) current() string {
	b, _ := os.ReadFile(p.logPath)
	if p.logFrom <= int64(len(b)) {
		b = b[p.logFrom:]
	}
	return string(b)
}

// tail returns the last n lines of the log.
func (p *proc) tail(n int) string {
	lines := strings.Split(strings.TrimRight(p.log(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitLog waits until the current incarnation's log contains one of lines,
// and fails if the process exits first or the wait outlasts within.
func (p *proc) waitLog(ctx context.Context, within time.Duration, lines ...string) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	logged := func() bool {
		log := p.current()
		for _, l := range lines {
			if strings.Contains(log, l) {
				return true
			}
		}
		return false
	}
	for {
		if logged() {
			return nil
		}
		if !p.running() {
			if logged() {
				return nil
			}
			return fmt.Errorf("%s exited (%v) before logging %q; its log:\n%s", p.name, p.exitErr, lines, p.tail(30))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not log %q within %s; its log:\n%s", p.name, lines, within, p.tail(30))
		case <-tick.C:
		}
	}
}

// logSummary counts the WARN and ERROR lines of a text log by message, for
// the report: "3× ERROR router unhealthy (error=...)".
func logSummary(log string) []string {
	type key struct{ level, msg string }
	counts := map[key]int{}
	first := map[key]string{}
	for _, line := range strings.Split(log, "\n") {
		level := fieldOf(line, "level")
		if level != "WARN" && level != "ERROR" {
			continue
		}
		k := key{level, fieldOf(line, "msg")}
		if counts[k] == 0 {
			first[k] = line
		}
		counts[k]++
	}
	keys := make([]key, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return counts[keys[i]] > counts[keys[j]] })
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%d× %s %q, first: %s", counts[k], k.level, k.msg, clip(first[k], 400)))
	}
	return out
}

// fieldOf returns the value of key=value (or key="value") in a slog text line.
func fieldOf(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		if !strings.HasPrefix(line, key+"=") {
			return ""
		}
		i = -1
	}
	v := line[i+len(key)+2:]
	if strings.HasPrefix(v, `"`) {
		var b bytes.Buffer
		for j := 1; j < len(v); j++ {
			switch v[j] {
			case '\\':
				if j+1 < len(v) {
					j++
					b.WriteByte(v[j])
				}
			case '"':
				return b.String()
			default:
				b.WriteByte(v[j])
			}
		}
		return b.String()
	}
	if j := strings.IndexByte(v, ' '); j >= 0 {
		return v[:j]
	}
	return v
}
