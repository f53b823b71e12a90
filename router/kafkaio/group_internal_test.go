package kafkaio

import "testing"

// TestOffsetMarksCommitUpToTheFirstNotDone: the position to commit is the
// lowest offset read and not done; records done behind it wait for it, and
// offsets may skip (transaction markers).
func TestOffsetMarksCommitUpToTheFirstNotDone(t *testing.T) {
	m := &offsetMarks{committed: -1}
	if _, ok := m.position(); ok {
		t.Fatal("a position before anything was read")
	}
	for _, o := range []int64{4, 5, 7, 8} { // 6: a transaction marker
		m.read(o)
	}
	check := func(want int64) {
		t.Helper()
		if got, ok := m.position(); !ok || got != want {
			t.Fatalf("position %d (%v), want %d", got, ok, want)
		}
	}
	check(4)
	m.done(5)
	m.done(8)
	check(4) // 4 is not done: 5 and 8 wait behind it
	m.done(4)
	check(7)  // 4 and 5 done; 6 was never read
	m.done(4) // again: no effect
	m.done(3) // never read: no effect
	check(7)
	m.done(7)
	check(9) // everything read is done: the one after the last
	m.read(9)
	check(9)
	m.done(9)
	check(10)
	if len(m.doneAhead) != 0 || len(m.pending) != 0 {
		t.Fatalf("marks left behind: pending %v, done ahead %v", m.pending, m.doneAhead)
	}
}
