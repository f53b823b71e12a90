package mcp_test

import (
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/api/mcp"
)

// waitFor waits for cond with a deadline (never a fixed sleep: it polls).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatal("condition not met in time")
		case <-tick.C:
		}
	}
}

type fakeProgressSource struct{ fakeProgress }

func (f *fakeProgressSource) init() mcp.ProgressSource {
	f.subs = map[string]func(mcp.Progress){}
	f.subd = make(chan string, 8)
	return f
}

type syncList struct {
	mu sync.Mutex
	v  []float64
}

func (l *syncList) add(x float64) { l.mu.Lock(); l.v = append(l.v, x); l.mu.Unlock() }
func (l *syncList) len() int      { l.mu.Lock(); defer l.mu.Unlock(); return len(l.v) }
func (l *syncList) values() []float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]float64(nil), l.v...)
}
