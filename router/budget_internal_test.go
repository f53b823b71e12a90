package router

import "testing"

// The byte gate pauses at the bound, counting what is on its way, and
// resumes below 90% of it, not at the bound (no flapping on one intent).
func TestByteGateArithmetic(t *testing.T) {
	g := byteGate{max: 1000}
	for _, step := range []struct {
		held int64
		full bool
	}{
		{0, false}, {999, false}, {1000, true}, {950, true}, {900, true}, {899, false}, {999, false}, {1500, true}, {899, false},
	} {
		if got := g.update(step.held); got != step.full {
			t.Fatalf("held %d: full %v, want %v", step.held, got, step.full)
		}
	}
	off := byteGate{}
	if off.update(1 << 40) {
		t.Fatal("no bound (0) paused")
	}
}
