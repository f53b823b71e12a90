package timeouts

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// checkInvariants walks every list of w and checks links, occupancy bits,
// counts, and that each timer sits where the placement rule says it must.
func checkInvariants[V any](t *testing.T, w *Wheel[V]) {
	t.Helper()
	if w.advancing {
		t.Fatal("advancing outside Advance")
	}
	pending := 0
	for id := range numLists {
		prev, n := nilIndex, 0
		for i := w.heads[id]; i != nilIndex; i = w.slab[i].next {
			e := &w.slab[i]
			if int(e.list) != id || e.prev != prev {
				t.Fatalf("list %d: entry %d has list %d prev %d, want prev %d", id, i, e.list, e.prev, prev)
			}
			if n++; n > len(w.slab) {
				t.Fatalf("list %d: cycle", id)
			}
			prev = i
			checkPlacement(t, w, id, e.deadline)
		}
		if id < listOverflow {
			if bit := w.occupied[id>>6]>>(id&63)&1 == 1; bit != (n > 0) {
				t.Fatalf("list %d: occupied bit %v with %d entries", id, bit, n)
			}
		}
		switch {
		case id == listHold && n > 0:
			t.Fatalf("hold list has %d entries outside Advance", n)
		case (id == listDueA || id == listDueB) && id != int(w.dueIn) && n > 0:
			t.Fatalf("idle due list %d has %d entries", id, n)
		}
		pending += n
	}
	if pending != w.Len() {
		t.Fatalf("lists hold %d entries, Len() = %d", pending, w.Len())
	}
	free := 0
	for i := w.free; i != nilIndex; i = w.slab[i].next {
		if w.slab[i].list != listFree {
			t.Fatalf("free entry %d has list %d", i, w.slab[i].list)
		}
		if free++; free > len(w.slab) {
			t.Fatal("free list cycle")
		}
	}
	if free+pending != len(w.slab) {
		t.Fatalf("%d free + %d pending != slab %d", free, pending, len(w.slab))
	}
}

func checkPlacement[V any](t *testing.T, w *Wheel[V], id int, d int64) {
	t.Helper()
	if id >= listOverflow+1 {
		return // due lists: any deadline the caller already passed
	}
	if d < w.startMs {
		t.Fatalf("list %d holds deadline %d before start %d", id, d, w.startMs)
	}
	tk, cur := w.tickOf(d), w.cur
	if tk < cur {
		t.Fatalf("list %d holds tick %d before cur %d", id, tk, cur)
	}
	if id == listOverflow {
		if tk>>wheelBits <= cur>>wheelBits || tk < w.overflowMin {
			t.Fatalf("overflow holds tick %d: cur %d, overflowMin %d", tk, cur, w.overflowMin)
		}
		return
	}
	l, s := id/numSlots, uint64(id%numSlots)
	shift := uint(l * slotBits)
	if tk>>(shift+slotBits) != cur>>(shift+slotBits) || tk>>shift&slotMask != s {
		t.Fatalf("level %d slot %d holds tick %#x with cur %#x", l, s, tk, cur)
	}
	if l > 0 && s == cur>>shift&slotMask && cur&(1<<shift-1) != 0 {
		t.Fatalf("level %d slot %d holds tick %#x but cur %#x is past its start", l, s, tk, cur)
	}
}

func TestEntrySize(t *testing.T) {
	if got := unsafe.Sizeof(entry[uint64]{}); got != 32 {
		t.Errorf("entry[uint64] is %d bytes, want 32", got)
	}
	if got := unsafe.Sizeof(Timer{}); got != 8 {
		t.Errorf("Timer is %d bytes, want 8", got)
	}
}

// A jump of the clock must cost in proportion to the timers it passes, not
// to the ticks it skips.
func TestWheelJumpSkipsEmptyTicks(t *testing.T) {
	const start = 1_700_000_000_000
	w, err := NewWheel[int](time.Millisecond, start)
	if err != nil {
		t.Fatal(err)
	}
	if n := w.Advance(start+time.Hour.Milliseconds(), nil); n != 0 || w.ticks != 0 {
		t.Fatalf("empty 1 h jump: fired %d, processed %d ticks", n, w.ticks)
	}
	now := int64(start + time.Hour.Milliseconds())
	for i, d := range []time.Duration{time.Second, 10 * time.Minute, 59 * time.Minute, 40 * 24 * time.Hour, 400 * 24 * time.Hour} {
		w.Schedule(now+d.Milliseconds(), i)
	}
	checkInvariants(t, w)
	if n := w.Advance(now+time.Hour.Milliseconds(), nil); n != 3 {
		t.Fatalf("1 h jump fired %d, want 3", n)
	}
	// Each timer is cascaded at most once per level and fired once.
	if w.ticks > 3*numLevels {
		t.Fatalf("1 h jump processed %d ticks", w.ticks)
	}
	checkInvariants(t, w)
	w.ticks = 0
	if n := w.Advance(now+100*365*24*time.Hour.Milliseconds(), nil); n != 2 {
		t.Fatalf("100 year jump fired %d, want 2", n)
	}
	if w.ticks > 2*(numLevels+1) {
		t.Fatalf("100 year jump processed %d ticks", w.ticks)
	}
	checkInvariants(t, w)
}

// TestWheelAgainstModel drives the wheel with random schedules, cancels,
// stale cancels, clock steps (small, large, backwards) and re-entrant
// callbacks, and compares every firing with a map of pending deadlines.
func TestWheelAgainstModel(t *testing.T) {
	for _, tick := range []time.Duration{time.Millisecond, 7 * time.Millisecond, 100 * time.Millisecond} {
		t.Run(tick.String(), func(t *testing.T) {
			runModel(t, tick, rand.New(rand.NewPCG(20261202, uint64(tick))), 20000)
		})
	}
}

type modelRun struct {
	t       *testing.T
	rng     *rand.Rand
	w       *Wheel[int]
	now     int64
	live    map[int]int64 // id -> deadline of pending timers
	handles []Timer       // by id, including fired and cancelled ones
}

func (m *modelRun) deadline() int64 {
	day := 24 * time.Hour.Milliseconds()
	switch r := m.rng.IntN(100); {
	case r < 5:
		return m.now - m.rng.Int64N(1000) // in the past
	case r < 40:
		return m.now + m.rng.Int64N(300)
	case r < 80:
		return m.now + m.rng.Int64N(120_000)
	case r < 92:
		return m.now + m.rng.Int64N(60*day)
	case r < 98:
		return m.now + m.rng.Int64N(3000*day) // past the levels: overflow
	default:
		return math.MaxInt64 - m.rng.Int64N(10)
	}
}

func (m *modelRun) schedule() {
	d := m.deadline()
	id := len(m.handles)
	m.handles = append(m.handles, m.w.Schedule(d, id))
	m.live[id] = d
}

func (m *modelRun) cancel(due map[int]bool) {
	if len(m.handles) == 0 {
		return
	}
	id := m.rng.IntN(len(m.handles))
	_, want := m.live[id]
	if got := m.w.Cancel(m.handles[id]); got != want {
		m.t.Fatalf("Cancel(id %d) = %v, want %v", id, got, want)
	}
	delete(m.live, id)
	delete(due, id)
}

func (m *modelRun) step() time.Duration {
	switch r := m.rng.IntN(100); {
	case r < 10:
		return 0
	case r < 60:
		return time.Duration(m.rng.IntN(20)) * time.Millisecond
	case r < 85:
		return time.Duration(m.rng.IntN(5000)) * time.Millisecond
	case r < 95:
		return -time.Duration(m.rng.IntN(50)) * time.Millisecond // the clock went back
	default:
		return time.Duration(m.rng.IntN(100*24*3600)) * time.Second
	}
}

func (m *modelRun) advance(now int64, reenter bool) {
	m.now = now
	due := map[int]bool{}
	for id, d := range m.live {
		if d <= m.now {
			due[id] = true
		}
	}
	fired := 0
	n := m.w.Advance(m.now, func(d int64, id int) {
		fired++
		if !due[id] || m.live[id] != d {
			m.t.Fatalf("at %d fired id %d (deadline %d): due %v, model deadline %d", m.now, id, d, due[id], m.live[id])
		}
		delete(due, id)
		delete(m.live, id)
		switch m.rng.IntN(4) {
		case 0:
			if !reenter {
				break
			}
			m.schedule() // may be due already: must wait for the next Advance
		case 1:
			if reenter {
				m.cancel(due)
			}
		}
	})
	if n != fired {
		m.t.Fatalf("Advance returned %d, callback ran %d times", n, fired)
	}
	if len(due) > 0 {
		m.t.Fatalf("at %d, %d due timers did not fire: %v", m.now, len(due), slices.Sorted(maps.Keys(due)))
	}
}

func runModel(t *testing.T, tick time.Duration, rng *rand.Rand, ops int) {
	const start = 1_700_000_000_000
	w, err := NewWheel[int](tick, start)
	if err != nil {
		t.Fatal(err)
	}
	m := &modelRun{t: t, rng: rng, w: w, now: start - 500, live: map[int]int64{}}
	for op := range ops {
		switch r := rng.IntN(100); {
		case r < 50:
			m.schedule()
		case r < 65:
			m.cancel(nil)
		default:
			m.advance(m.now+m.step().Milliseconds(), true)
		}
		if w.Len() != len(m.live) {
			t.Fatalf("op %d: Len() = %d, model has %d", op, w.Len(), len(m.live))
		}
		if op%50 == 0 {
			checkInvariants(t, w)
		}
	}
	checkInvariants(t, w)
	// Timers scheduled by callbacks during the first drain fire in the second.
	m.advance(math.MaxInt64, true)
	m.advance(math.MaxInt64, false)
	if len(m.live) > 0 || w.Len() > 0 {
		t.Fatalf("after the drain: model %d, wheel %d pending", len(m.live), w.Len())
	}
	checkInvariants(t, w)
}

// A slot's generation skips 0 when it wraps, so the zero Timer never matches
// and the old handle does not match the new timer.
func TestWheelGenerationWraps(t *testing.T) {
	w, err := NewWheel[int](time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	old := w.Schedule(10, 1)
	w.slab[old.idx].gen = math.MaxUint32
	old.gen = math.MaxUint32
	if !w.Cancel(old) {
		t.Fatal("Cancel at the last generation failed")
	}
	next := w.Schedule(10, 2)
	if next.idx != old.idx || next.gen != 1 {
		t.Fatalf("reused slot got %+v, want index %d generation 1", next, old.idx)
	}
	if w.Cancel(old) || w.Cancel(Timer{idx: old.idx}) {
		t.Fatal("stale or zero handle cancelled the reused slot")
	}
	checkInvariants(t, w)
}

// Timers in the overflow are revisited once when the clock reaches the span
// of the earliest of them, not on every tick after.
func TestWheelOverflowRevisitedOnce(t *testing.T) {
	w, err := NewWheel[int](time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	day := 24 * time.Hour.Milliseconds()
	w.Schedule(60*day, 1)
	w.Schedule(3*365*day, 2)
	cancelled := w.Schedule(55*day, 3)
	w.Cancel(cancelled) // leaves overflowMin a stale lower bound
	if n := w.Advance(50*day, nil); n != 0 {
		t.Fatalf("fired %d", n)
	}
	checkInvariants(t, w)
	w.ticks = 0
	if n := w.Advance(50*day+time.Hour.Milliseconds(), nil); n != 0 || w.ticks != 0 {
		t.Fatalf("an hour later: fired %d, processed %d ticks", n, w.ticks)
	}
	if n := w.Advance(4*365*day, nil); n != 2 || w.ticks > 2*(numLevels+2) {
		t.Fatalf("four years on: fired %d, processed %d ticks", n, w.ticks)
	}
	checkInvariants(t, w)
}
