package mcp_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/mcp"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// TestWatchProgressForwardsTheIntentsProgress: the ProgressSource on
// api.Results forwards the subscribed intent's progress records, in order,
// only its tenant's, never going back, and nothing after stop.
func TestWatchProgressForwardsTheIntentsProgress(t *testing.T) {
	r := api.NewResults(100)
	r.Begin(api.Position{Results: []int64{0}, Timeouts: []int64{0}, Progress: []int64{0}})
	var (
		mu  sync.Mutex
		got []mcp.Progress
	)
	stop := mcp.WatchProgress{Results: r}.SubscribeProgress("acme", "i-1", func(p mcp.Progress) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, p)
	})
	defer stop()
	chunk := func(offset int64, tenant string, seq int64, progress *float64) {
		r.AddProgress(0, offset, &schemas.IntentProgress{
			IntentID: "i-1", IntentType: "write", Agent: "writer", Sequence: seq, Tenant: &tenant,
			Progress: progress, Total: schemas.Ptr(10.0), Message: schemas.Ptr("writing"),
		})
	}
	chunk(0, "acme", 1, schemas.Ptr(1.0))
	chunk(1, "globex", 1, schemas.Ptr(5.0)) // another tenant's intent under the same id
	chunk(2, "acme", 2, schemas.Ptr(3.0))
	chunk(3, "acme", 3, schemas.Ptr(2.0)) // the agent went back: reported as 3
	chunk(4, "acme", 4, nil)              // no figure: its sequence, 4
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 4 })
	stop()
	chunk(5, "acme", 5, schemas.Ptr(9.0))
	mu.Lock()
	defer mu.Unlock()
	want := []float64{1, 3, 3, 4}
	for i, p := range got {
		if p.Progress != want[i] || p.Total != 10 || p.Message != "writing" {
			t.Fatalf("report %d = %+v, want progress %v of 10", i, p, want[i])
		}
	}
	if len(got) != 4 {
		t.Fatalf("%d reports after stop, want 4", len(got))
	}
}

// TestWatchProgressBoundsBytes: a subscription whose reader (the session's
// stream) is stuck holds at most MaxBytes of progress records for it; past
// that it ends (counted by bound), the reader gets what was held and
// nothing after, and the subscription's stop still returns.
func TestWatchProgressBoundsBytes(t *testing.T) {
	r := api.NewResults(100)
	r.Begin(api.Position{Results: []int64{0}, Timeouts: []int64{0}, Progress: []int64{0}})
	stuck, first := make(chan struct{}), make(chan struct{}, 1)
	var (
		mu  sync.Mutex
		got []float64
	)
	stop := mcp.WatchProgress{Results: r, MaxBytes: 25_000}.SubscribeProgress("", "i-1", func(p mcp.Progress) {
		select {
		case first <- struct{}{}:
		default:
		}
		<-stuck
		mu.Lock()
		defer mu.Unlock()
		got = append(got, p.Progress)
	})
	defer stop()
	var unstick sync.Once
	release := func() { unstick.Do(func() { close(stuck) }) }
	defer release() // before stop, which waits for the reader
	big := schemas.Ptr(schemas.JSON(`"` + strings.Repeat("x", 10_000) + `"`))
	chunk := func(seq int64) {
		r.AddProgress(0, seq, &schemas.IntentProgress{IntentID: "i-1", IntentType: "write", Agent: "writer", Sequence: seq, Partial: big})
	}
	chunk(1)
	<-first // the reader holds record 1: 2 and 3 wait, 4 is one too many
	for seq := int64(2); seq <= 5; seq++ {
		chunk(seq)
	}
	if events, bytes := r.WatchOverflows(); events != 0 || bytes != 1 {
		t.Fatalf("overflows: %d of events, %d of bytes; want 0 and 1", events, bytes)
	}
	release()
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 3 })
	stop()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 || got[2] != 3 {
		t.Fatalf("reports %v, want 1, 2, 3", got)
	}
}
