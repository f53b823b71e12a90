package timeouts_test

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/timeouts"
)

const start = int64(1_700_000_000_000) // a unix ms in 2023

const day = 24 * time.Hour

func newWheel(t *testing.T, tick time.Duration) *timeouts.Wheel[string] {
	t.Helper()
	w, err := timeouts.NewWheel[string](tick, start)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// fired collects what one Advance fired, sorted.
func advance(w *timeouts.Wheel[string], nowMs int64) []string {
	var got []string
	n := w.Advance(nowMs, func(_ int64, v string) { got = append(got, v) })
	if n != len(got) {
		panic("Advance count disagrees with its callbacks")
	}
	slices.Sort(got)
	return got
}

func TestNewWheelValidates(t *testing.T) {
	for _, tick := range []time.Duration{0, -time.Millisecond, 500 * time.Microsecond, 1500 * time.Microsecond} {
		if _, err := timeouts.NewWheel[int](tick, start); !errors.Is(err, timeouts.ErrInvalidTick) {
			t.Errorf("tick %v: err = %v, want ErrInvalidTick", tick, err)
		}
	}
	if _, err := timeouts.NewWheel[int](time.Millisecond, -1); !errors.Is(err, timeouts.ErrInvalidStart) {
		t.Errorf("start -1: err = %v, want ErrInvalidStart", err)
	}
	w, err := timeouts.NewWheel[int](10*time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	if w.Tick() != 10*time.Millisecond || w.Len() != 0 {
		t.Errorf("Tick() = %v, Len() = %d", w.Tick(), w.Len())
	}
}

// Stepping the clock one millisecond at a time, every timer fires on exactly
// the Advance that reaches its deadline, whatever the tick.
func TestWheelFiresExactlyAtDeadline(t *testing.T) {
	offsets := []int64{0, 1, 5, 9, 10, 11, 99, 255, 256, 257, 1000, 4095, 65535, 65536, 65537, 70_000, 100_000}
	for _, tick := range []time.Duration{time.Millisecond, 7 * time.Millisecond, 10 * time.Millisecond, time.Second} {
		t.Run(tick.String(), func(t *testing.T) {
			w := newWheel(t, tick)
			want := map[int64][]string{}
			for _, off := range offsets {
				v := time.Duration(off * int64(time.Millisecond)).String()
				w.Schedule(start+off, v)
				want[start+off] = append(want[start+off], v)
			}
			for now := start; now <= start+100_000; now++ {
				got := advance(w, now)
				if !slices.Equal(got, want[now]) {
					t.Fatalf("Advance(start+%d) fired %v, want %v", now-start, got, want[now])
				}
			}
			if w.Len() != 0 {
				t.Fatalf("Len() = %d after all deadlines", w.Len())
			}
		})
	}
}

func TestWheelCancel(t *testing.T) {
	w := newWheel(t, time.Millisecond)
	a := w.Schedule(start+10, "a")
	b := w.Schedule(start+10, "b")
	if w.Len() != 2 {
		t.Fatalf("Len() = %d", w.Len())
	}
	if !w.Cancel(a) {
		t.Fatal("Cancel of a pending timer = false")
	}
	if w.Cancel(a) {
		t.Fatal("second Cancel = true")
	}
	if w.Cancel(timeouts.Timer{}) {
		t.Fatal("Cancel of the zero Timer = true")
	}
	if got := advance(w, start+10); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("fired %v, want [b]", got)
	}
	if w.Cancel(b) {
		t.Fatal("Cancel of a fired timer = true")
	}
	if w.Len() != 0 {
		t.Fatalf("Len() = %d", w.Len())
	}
}

// A handle whose timer is gone never cancels the timer that reuses its slot.
func TestWheelStaleHandle(t *testing.T) {
	w := newWheel(t, time.Millisecond)
	old := w.Schedule(start+5, "old")
	w.Cancel(old)
	reused := w.Schedule(start+5, "reused")
	if w.Cancel(old) {
		t.Fatal("stale handle cancelled the reused slot")
	}
	if got := advance(w, start+5); !slices.Equal(got, []string{"reused"}) {
		t.Fatalf("fired %v", got)
	}
	// A fired timer's handle is stale too.
	next := w.Schedule(start+9, "next")
	if w.Cancel(reused) || w.Cancel(old) {
		t.Fatal("stale handle of a fired timer cancelled")
	}
	if !w.Cancel(next) {
		t.Fatal("fresh handle did not cancel")
	}
}

func TestWheelPastDeadlines(t *testing.T) {
	w := newWheel(t, 10*time.Millisecond)
	w.Schedule(math.MinInt64, "min")
	w.Schedule(0, "epoch")
	w.Schedule(start-1, "before-start")
	if got := advance(w, start-2); !slices.Equal(got, []string{"epoch", "min"}) {
		t.Fatalf("Advance(start-2) fired %v", got)
	}
	if got := advance(w, start); !slices.Equal(got, []string{"before-start"}) {
		t.Fatalf("Advance(start) fired %v", got)
	}
	advance(w, start+1234)
	// Behind the wheel's position, and inside the tick it is part way through.
	w.Schedule(start+500, "behind")
	w.Schedule(start+1233, "this-tick")
	w.Schedule(start+1234, "now")
	w.Schedule(start+1235, "future")
	if got := advance(w, start+1234); !slices.Equal(got, []string{"behind", "now", "this-tick"}) {
		t.Fatalf("next Advance fired %v", got)
	}
	if got := advance(w, start+1235); !slices.Equal(got, []string{"future"}) {
		t.Fatalf("Advance(+1235) fired %v", got)
	}
}

// A clock that goes back fires nothing that is not due at the earlier time.
func TestWheelClockGoesBack(t *testing.T) {
	w := newWheel(t, 10*time.Millisecond)
	advance(w, start+1000)
	w.Schedule(start+950, "past")
	w.Schedule(start+1003, "soon")
	if got := advance(w, start+900); len(got) != 0 {
		t.Fatalf("Advance back to +900 fired %v", got)
	}
	if got := advance(w, start+960); !slices.Equal(got, []string{"past"}) {
		t.Fatalf("Advance(+960) fired %v", got)
	}
	if got := advance(w, start+1003); !slices.Equal(got, []string{"soon"}) {
		t.Fatalf("Advance(+1003) fired %v", got)
	}
}

func TestWheelReentrantCallbacks(t *testing.T) {
	w := newWheel(t, time.Millisecond)
	var self, twinA, twinB, far timeouts.Timer
	var log []string
	self = w.Schedule(start+10, "retry")
	twinA = w.Schedule(start+10, "twin")
	twinB = w.Schedule(start+10, "twin")
	far = w.Schedule(start+time.Hour.Milliseconds(), "far")
	n := w.Advance(start+10, func(d int64, v string) {
		log = append(log, v)
		switch v {
		case "retry":
			if w.Cancel(self) {
				t.Error("a firing timer cancelled itself")
			}
			if !w.Cancel(far) {
				t.Error("callback could not cancel a pending timer")
			}
			w.Schedule(d+100, "retried")    // a retry, later
			w.Schedule(d, "due-again")      // due now: waits for the next Advance
			w.Schedule(d-5, "past-in-call") // likewise
		case "twin":
			// Whichever twin fires first cancels the other, in the same slot.
			if !w.Cancel(twinA) && !w.Cancel(twinB) {
				t.Error("first twin could not cancel the second")
			}
		}
	})
	slices.Sort(log)
	if n != 2 || !slices.Equal(log, []string{"retry", "twin"}) {
		t.Fatalf("first Advance fired %d: %v", n, log)
	}
	if got := advance(w, start+10); !slices.Equal(got, []string{"due-again", "past-in-call"}) {
		t.Fatalf("second Advance fired %v", got)
	}
	if got := advance(w, start+109); len(got) != 0 {
		t.Fatalf("Advance(+109) fired %v", got)
	}
	if got := advance(w, start+2*time.Hour.Milliseconds()); !slices.Equal(got, []string{"retried"}) {
		t.Fatalf("Advance(+2h) fired %v", got)
	}
	if w.Len() != 0 {
		t.Fatalf("Len() = %d", w.Len())
	}
}

func TestWheelAdvanceFromCallbackPanics(t *testing.T) {
	w := newWheel(t, time.Millisecond)
	w.Schedule(start, "x")
	defer func() {
		if recover() == nil {
			t.Fatal("nested Advance did not panic")
		}
	}()
	w.Advance(start, func(int64, string) { w.Advance(start, nil) })
}

// A callback that panics loses no timer: the rest fire on the next Advance.
func TestWheelCallbackPanic(t *testing.T) {
	for _, tick := range []time.Duration{time.Millisecond, 10 * time.Millisecond} {
		w := newWheel(t, tick)
		w.Schedule(start-1, "due-1")
		w.Schedule(start-1, "due-2")
		for _, v := range []string{"a", "b", "c"} {
			w.Schedule(start+42, v)
		}
		w.Schedule(start+45, "later") // at a 10 ms tick, in the same tick as a, b, c
		w.Schedule(start+10_000, "far")
		var fired []string
		panicky := func(after int) {
			defer func() { _ = recover() }()
			w.Advance(start+43, func(_ int64, v string) {
				fired = append(fired, v)
				if len(fired) == after {
					panic("boom")
				}
			})
		}
		panicky(1) // the other due timer still waits its turn
		panicky(4) // after it, two of a, b, c
		if got := fired[:2]; !slices.Contains(got, "due-1") || !slices.Contains(got, "due-2") {
			t.Fatalf("tick %v: the due timer left by a panic did not fire next: %v", tick, fired)
		}
		fired = append(fired, advance(w, start+20_000)...)
		slices.Sort(fired)
		if want := []string{"a", "b", "c", "due-1", "due-2", "far", "later"}; !slices.Equal(fired, want) {
			t.Fatalf("tick %v: fired %v, want %v", tick, fired, want)
		}
	}
}

// One Advance across an hour of 1 ms ticks fires what is due and nothing else.
func TestWheelLargeJump(t *testing.T) {
	w := newWheel(t, time.Millisecond)
	for _, d := range []time.Duration{time.Millisecond, time.Second, 10 * time.Minute, time.Hour, time.Hour + time.Millisecond} {
		w.Schedule(start+d.Milliseconds(), d.String())
	}
	got := advance(w, start+time.Hour.Milliseconds())
	if !slices.Equal(got, []string{"10m0s", "1h0m0s", "1ms", "1s"}) {
		t.Fatalf("fired %v", got)
	}
	if got := advance(w, start+time.Hour.Milliseconds()+1); !slices.Equal(got, []string{"1h0m0.001s"}) {
		t.Fatalf("then fired %v", got)
	}
}

// Deadlines beyond what the levels span (2^32 ticks) wait in the overflow and
// still fire exactly on time, whether the clock creeps up or leaps.
func TestWheelFarDeadlines(t *testing.T) {
	offsets := []int64{
		(30 * day).Milliseconds(),
		1<<32 - 1, 1 << 32, 1<<32 + 1, // the edge of the levels at 1 ms
		(60 * day).Milliseconds(),
		(365 * day).Milliseconds(),
		(100 * 365 * day).Milliseconds(),
		3 << 40,
		math.MaxInt64 - start,
	}
	for _, tick := range []time.Duration{time.Millisecond, 10 * time.Millisecond} {
		t.Run(tick.String()+"/creep", func(t *testing.T) {
			w := newWheel(t, tick)
			for _, off := range offsets {
				w.Schedule(start+off, "x")
			}
			for i, off := range offsets {
				if got := advance(w, start+off-1); len(got) != 0 {
					t.Fatalf("Advance(deadline %d - 1) fired %v", i, got)
				}
				if got := advance(w, start+off); len(got) != 1 {
					t.Fatalf("Advance(deadline %d) fired %v", i, got)
				}
			}
		})
		t.Run(tick.String()+"/leap", func(t *testing.T) {
			w := newWheel(t, tick)
			for _, off := range offsets {
				w.Schedule(start+off, "x")
			}
			if got := advance(w, start+(400*day).Milliseconds()); len(got) != 6 {
				t.Fatalf("Advance(+400 days) fired %d, want 6", len(got))
			}
			if got := advance(w, math.MaxInt64); len(got) != 3 {
				t.Fatalf("Advance(MaxInt64) fired %d, want 3", len(got))
			}
		})
	}
}

func TestWheelNilExpireCounts(t *testing.T) {
	w := newWheel(t, time.Millisecond)
	for i := range 1000 {
		w.Schedule(start+int64(i%300), "x")
	}
	if n := w.Advance(start+299, nil); n != 1000 || w.Len() != 0 {
		t.Fatalf("fired %d, Len() = %d", n, w.Len())
	}
}

// The slab is reused: scheduling and cancelling in a steady state allocates
// nothing.
func TestWheelSteadyStateAllocs(t *testing.T) {
	w := newWheel(t, time.Millisecond)
	for i := range 1000 {
		w.Schedule(start+int64(i), "x")
	}
	d := start
	allocs := testing.AllocsPerRun(1000, func() {
		d++
		w.Cancel(w.Schedule(d, "y"))
	})
	if allocs != 0 {
		t.Fatalf("Schedule+Cancel allocates %v per run", allocs)
	}
}
