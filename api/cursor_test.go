package api_test

import (
	"runtime"
	"testing"

	"github.com/switchboard-mcp/switchboard/api"
)

func TestCursorRoundTrip(t *testing.T) {
	p := api.Position{Results: []int64{1234, 88, 0}, Timeouts: []int64{17, 3, 0}}
	c := p.String()
	if c != "r0:1234,r1:88,r2:0,t0:17,t1:3,t2:0" {
		t.Fatalf("cursor = %q", c)
	}
	got, err := api.ParseCursor(c)
	if err != nil || got.String() != c {
		t.Fatalf("ParseCursor(%q) = %v, %v", c, got, err)
	}
	// Order in the text does not matter; every partition must be there once.
	if got, err := api.ParseCursor("t0:5,r1:2,r0:1"); err != nil || got.String() != "r0:1,r1:2,t0:5" {
		t.Fatalf("unordered: %v %v", got, err)
	}
	for _, bad := range []string{"", "r0", "r0:", "x0:1", "r0:1,r0:2", "r1:5", "r0:-1", "r0:1,,t0:0", "r-1:0", "r0:1x", "r99999999:0"} {
		if _, err := api.ParseCursor(bad); err == nil {
			t.Errorf("ParseCursor(%q) accepted", bad)
		}
	}
}

// TestCursorHighPartitionAllocatesLittle: a short cursor naming a high
// partition is refused before slices grow to its size.
func TestCursorHighPartitionAllocatesLittle(t *testing.T) {
	const bad = "r65536:0,t65536:0"
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := api.ParseCursor(bad)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatalf("ParseCursor(%q) accepted", bad)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Fatalf("ParseCursor(%q) allocated %d bytes, want under 64 KiB", bad, n)
	}
	if _, err := api.ParseCursor("r1:0,r0:0,t0:0"); err != nil {
		t.Fatalf("a complete cursor out of order: %v", err)
	}
}

// The cursor's third stream: progress parts come last; a cursor written
// before the progress stream existed still parses, without progress.
func TestCursorProgressStream(t *testing.T) {
	p := api.Position{Results: []int64{1, 2}, Timeouts: []int64{3, 4}, Progress: []int64{5120, 0}}
	c := p.String()
	if c != "r0:1,r1:2,t0:3,t1:4,p0:5120,p1:0" {
		t.Fatalf("cursor = %q", c)
	}
	got, err := api.ParseCursor(c)
	if err != nil || got.String() != c || len(got.Progress) != 2 || got.Progress[0] != 5120 {
		t.Fatalf("ParseCursor(%q) = %v, %v", c, got, err)
	}
	old, err := api.ParseCursor("r0:1,r1:2,t0:3,t1:4")
	if err != nil || len(old.Progress) != 0 || old.Results[1] != 2 {
		t.Fatalf("an old cursor: %v, %v", old, err)
	}
	for _, bad := range []string{"r0:1,t0:1,p1:0", "r0:1,t0:1,p0:1,p0:2", "r0:1,q0:1"} {
		if _, err := api.ParseCursor(bad); err == nil {
			t.Errorf("ParseCursor(%q) accepted", bad)
		}
	}
}
