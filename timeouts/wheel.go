package timeouts

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"
)

// The wheel has numLevels levels of numSlots slots. A slot of level l spans
// numSlots^l ticks, so the levels together span 2^wheelBits ticks (about 49.7
// days at a 1 ms tick). Timers beyond that wait in an overflow list.
const (
	slotBits    = 8
	numSlots    = 1 << slotBits
	slotMask    = numSlots - 1
	numLevels   = 4
	wheelBits   = slotBits * numLevels
	bitmapWords = numSlots / 64
)

// List ids. Ids below listOverflow are level*numSlots + slot.
const (
	listOverflow = numLevels * numSlots // beyond the top level
	listDueA     = listOverflow + 1     // already due when scheduled: one of two
	listDueB     = listOverflow + 2     // buffers, swapped by every Advance
	listHold     = listOverflow + 3     // not-yet-due timers of a partly elapsed tick
	numLists     = listOverflow + 4
	listFree     = math.MaxUint16 // the entry is on the free list
)

const nilIndex int32 = -1

// entry is one slot of the slab. Pending entries sit on exactly one
// intrusive, doubly linked list; free entries are chained through next.
type entry[V any] struct {
	deadline   int64
	next, prev int32
	gen        uint32 // bumped on release, so stale Timers do not match
	list       uint16
	v          V
}

// Timer is a handle to a scheduled timer, returned by Wheel.Schedule and
// passed to Wheel.Cancel. It is small and comparable; the zero Timer refers to
// no timer. A Timer is only meaningful to the Wheel that returned it.
type Timer struct {
	idx int32
	gen uint32 // never 0 for a real timer
}

// Wheel is a hierarchical timing wheel of deadlines carrying a value of type
// V, modelled on Kafka's purgatory. It is not safe for concurrent use: the
// router's event loop owns it and is the only goroutine that calls it.
//
// A Wheel reads no clock and starts no goroutine or runtime timer. Deadlines
// are absolute unix milliseconds, and the owner calls Advance with the current
// time, typically from one ticker every Tick. Advance fires every pending timer
// whose deadline is at or before the time it is given, exactly once each and
// in no particular order: a timer never fires early, and fires on the first
// Advance whose time reaches its deadline, whatever the tick. The tick sets the
// granularity of the wheel's slots; calling Advance more often than once a
// tick only costs a rescan of the current tick's timers.
//
// Schedule, Cancel and expiry cost O(1) amortised. Advance skips empty slots
// with occupancy bitmaps, so a jump of the clock costs time in proportion to
// the timers it passes, not to the ticks. Timers live in a slab that grows as
// needed and never shrinks; at rest a pending timer costs about 24 bytes plus
// the size of V.
type Wheel[V any] struct {
	tickMs  int64
	startMs int64

	// cur is the next tick to process, counted from startMs. Every timer in
	// the levels has a tick >= cur, and sits at the lowest level l where its
	// tick and cur agree above l, in the slot of its level-l digit.
	cur uint64

	slab  []entry[V]
	free  int32 // head of the free list
	len   int
	heads [numLists]int32
	// occupied[id>>6] bit id&63 is set when list id (a level slot) is not empty.
	occupied    [numLevels * bitmapWords]uint64
	overflowMin uint64 // lower bound on the smallest tick in the overflow list

	dueIn     uint16 // the due list that Schedule appends to
	advancing bool
	nowMs     int64 // the time of the current or last Advance

	ticks uint64 // ticks processed, for tests
}

// NewWheel returns an empty wheel whose first tick starts at startMs (unix
// milliseconds, not negative) and whose resolution is tick, a whole number of
// milliseconds of at least 1 ms.
func NewWheel[V any](tick time.Duration, startMs int64) (*Wheel[V], error) {
	if tick < time.Millisecond || tick%time.Millisecond != 0 {
		return nil, fmt.Errorf("%w: got %v", ErrInvalidTick, tick)
	}
	if startMs < 0 {
		return nil, fmt.Errorf("%w: got %d", ErrInvalidStart, startMs)
	}
	w := &Wheel[V]{
		tickMs:  tick.Milliseconds(),
		startMs: startMs,
		free:    nilIndex,
		dueIn:   listDueA,
		nowMs:   math.MinInt64,
	}
	for i := range w.heads {
		w.heads[i] = nilIndex
	}
	return w, nil
}

// Tick returns the wheel's resolution.
func (w *Wheel[V]) Tick() time.Duration { return time.Duration(w.tickMs) * time.Millisecond }

// Len returns the number of pending timers.
func (w *Wheel[V]) Len() int { return w.len }

// Grow makes room for n more pending timers without growing the slab again,
// for a caller that knows how many it is about to schedule (a restore).
func (w *Wheel[V]) Grow(n int) {
	if n > 0 {
		w.slab = slices.Grow(w.slab, n)
	}
}

// Schedule adds a timer that fires with v once Advance reaches deadlineMs. A
// deadline already in the past fires on the next Advance. Schedule may be
// called from an expire callback; a timer scheduled there whose deadline is at
// or before the time being advanced to fires on the next Advance, not the
// current one, so a callback that keeps rescheduling cannot livelock Advance.
//
// Schedule panics if more than 2^31-1 timers are pending.
func (w *Wheel[V]) Schedule(deadlineMs int64, v V) Timer {
	i := w.alloc()
	e := &w.slab[i]
	e.deadline = deadlineMs
	e.v = v
	w.len++
	switch {
	case deadlineMs < w.startMs, w.advancing && deadlineMs <= w.nowMs:
		w.link(i, w.dueIn)
	default:
		if t := w.tickOf(deadlineMs); t < w.cur {
			w.link(i, w.dueIn)
		} else {
			w.insert(i, t)
		}
	}
	return Timer{idx: i, gen: e.gen}
}

// Cancel removes the timer t refers to and reports whether it was pending. It
// returns false for the zero Timer and for a timer that already fired or was
// cancelled, even if its slot has since been reused by another timer. Cancel
// may be called from an expire callback.
func (w *Wheel[V]) Cancel(t Timer) bool {
	if t.gen == 0 || uint(t.idx) >= uint(len(w.slab)) {
		return false
	}
	e := &w.slab[t.idx]
	if e.gen != t.gen || e.list == listFree {
		return false
	}
	w.unlink(t.idx)
	w.release(t.idx)
	return true
}

// Advance fires every pending timer whose deadline is at or before nowMs,
// calling expire (which may be nil) once for each with its deadline and
// value, and returns how many fired. expire may call Schedule and Cancel but
// not Advance. A time earlier than a previous Advance fires nothing that is not
// due at that earlier time.
//
// If expire panics, the timers not yet fired stay pending and the wheel stays
// usable.
func (w *Wheel[V]) Advance(nowMs int64, expire func(deadlineMs int64, v V)) int {
	if w.advancing {
		panic("timeouts: Wheel.Advance called from an expire callback")
	}
	w.advancing = true
	w.nowMs = nowMs
	defer w.endAdvance()

	n := w.fireDue(expire)
	if nowMs < w.startMs {
		return n
	}
	nowTick := w.tickOf(nowMs)
	if nowTick < w.cur {
		return n
	}
	// complete: nowMs is the last millisecond of its tick, so every timer of
	// that tick is due.
	complete := uint64(nowMs-w.startMs)%uint64(w.tickMs) == uint64(w.tickMs-1)
	for {
		next, ok := w.nextEvent()
		if !ok || next > nowTick {
			// Nothing happens before nowTick: jump.
			w.cur = nowTick
			if complete {
				w.cur++
			}
			return n
		}
		w.cur = next
		partial := next == nowTick && !complete
		n += w.processTick(partial, expire)
		if partial {
			return n
		}
		w.cur++
	}
}

// endAdvance runs when Advance returns or its callback panics. After a normal
// return the lists it touches are empty; after a panic it puts back the timers
// that were waiting their turn, so none is lost.
func (w *Wheel[V]) endAdvance() {
	w.advancing = false
	other := uint16(listDueA + listDueB - w.dueIn)
	w.moveAll(other, w.dueIn)
	w.moveAll(listHold, uint16(w.cur&slotMask))
}

// fireDue fires the timers that were already due when scheduled. Timers that
// the callbacks schedule go to the other buffer, for the next Advance.
func (w *Wheel[V]) fireDue(expire func(int64, V)) int {
	l := w.dueIn
	w.dueIn = listDueA + listDueB - l
	n := 0
	for {
		i := w.heads[l]
		if i == nilIndex {
			return n
		}
		w.unlink(i)
		e := &w.slab[i]
		if e.deadline > w.nowMs { // the clock went back
			w.link(i, w.dueIn)
			continue
		}
		n++
		w.fire(i, expire)
	}
}

// processTick processes tick cur: it moves the timers whose slot begins at cur
// down to lower levels, then fires level 0's slot for cur. When partial, cur
// has only partly elapsed and timers of cur not yet due stay in their slot.
func (w *Wheel[V]) processTick(partial bool, expire func(int64, V)) int {
	w.ticks++
	cur := w.cur
	if w.heads[listOverflow] != nilIndex && cur >= w.overflowMin&^(1<<wheelBits-1) {
		w.cascade(listOverflow)
	}
	for l := numLevels - 1; l > 0; l-- {
		// By the placement invariant this slot is only occupied when cur is
		// where it begins.
		id := uint16(l*numSlots + int(cur>>(l*slotBits))&slotMask)
		if w.heads[id] != nilIndex {
			w.cascade(id)
		}
	}
	slot := uint16(cur & slotMask)
	n := 0
	for {
		i := w.heads[slot]
		if i == nilIndex {
			break
		}
		w.unlink(i)
		if partial && w.slab[i].deadline > w.nowMs {
			w.link(i, listHold)
			continue
		}
		n++
		w.fire(i, expire)
	}
	if partial {
		w.moveAll(listHold, slot)
	}
	return n
}

// fire releases pending entry i, already unlinked, and then calls expire with
// its deadline and value, so that the callback sees the timer as gone and may
// reuse its slot.
func (w *Wheel[V]) fire(i int32, expire func(int64, V)) {
	e := &w.slab[i]
	d, v := e.deadline, e.v
	w.release(i)
	if expire != nil {
		expire(d, v)
	}
}

// cascade empties list id and places its timers again relative to cur. It
// calls no callback, so it may walk the detached chain directly.
func (w *Wheel[V]) cascade(id uint16) {
	i := w.heads[id]
	w.heads[id] = nilIndex
	if id < listOverflow {
		w.occupied[id>>6] &^= 1 << (id & 63)
	} // else insert recomputes overflowMin, the overflow list being empty now
	for i != nilIndex {
		next := w.slab[i].next
		w.insert(i, w.tickOf(w.slab[i].deadline))
		i = next
	}
}

// nextEvent returns the first tick >= cur at which something must be done: a
// level-0 slot to fire, a higher slot to cascade, or the overflow to revisit.
func (w *Wheel[V]) nextEvent() (uint64, bool) {
	cur := w.cur
	best, found := uint64(math.MaxUint64), false
	for l := range numLevels {
		shift := uint(l * slotBits)
		s, ok := w.nextSlot(l, int(cur>>shift)&slotMask)
		if !ok {
			continue
		}
		at := max(cur>>(shift+slotBits)<<(shift+slotBits)|uint64(s)<<shift, cur)
		if at < best {
			best, found = at, true
			if at == cur {
				return at, true
			}
		}
	}
	if w.heads[listOverflow] != nilIndex {
		if at := max(w.overflowMin&^(1<<wheelBits-1), cur); at < best {
			best, found = at, true
		}
	}
	return best, found
}

// nextSlot returns the first occupied slot >= from at level l.
func (w *Wheel[V]) nextSlot(l, from int) (int, bool) {
	words := w.occupied[l*bitmapWords : (l+1)*bitmapWords]
	wi := from >> 6
	m := words[wi] &^ (uint64(1)<<(from&63) - 1)
	for {
		if m != 0 {
			return wi<<6 | bits.TrailingZeros64(m), true
		}
		wi++
		if wi == bitmapWords {
			return 0, false
		}
		m = words[wi]
	}
}

// tickOf returns the tick of a time at or after startMs.
func (w *Wheel[V]) tickOf(ms int64) uint64 {
	if w.tickMs == 1 {
		return uint64(ms - w.startMs)
	}
	return uint64(ms-w.startMs) / uint64(w.tickMs)
}

// insert links entry i, of tick t >= cur, into its place: the lowest level l
// at which t and cur agree on every digit above l, in the slot of t's level-l
// digit; or the overflow list when they differ above the top level.
func (w *Wheel[V]) insert(i int32, t uint64) {
	x := t ^ w.cur
	if x < numSlots {
		w.link(i, uint16(t&slotMask))
		return
	}
	l := (bits.Len64(x) - 1) / slotBits
	if l >= numLevels {
		if w.heads[listOverflow] == nilIndex || t < w.overflowMin {
			w.overflowMin = t
		}
		w.link(i, listOverflow)
		return
	}
	w.link(i, uint16(l*numSlots+int(t>>(l*slotBits))&slotMask))
}

// link pushes entry i on the front of list id.
func (w *Wheel[V]) link(i int32, id uint16) {
	e := &w.slab[i]
	h := w.heads[id]
	e.list, e.prev, e.next = id, nilIndex, h
	if h != nilIndex {
		w.slab[h].prev = i
	} else if id < listOverflow {
		w.occupied[id>>6] |= 1 << (id & 63)
	}
	w.heads[id] = i
}

// unlink removes entry i from its list.
func (w *Wheel[V]) unlink(i int32) {
	e := &w.slab[i]
	if e.prev != nilIndex {
		w.slab[e.prev].next = e.next
	} else {
		w.heads[e.list] = e.next
		if e.next == nilIndex && e.list < listOverflow {
			w.occupied[e.list>>6] &^= 1 << (e.list & 63)
		}
	}
	if e.next != nilIndex {
		w.slab[e.next].prev = e.prev
	}
}

// moveAll moves every entry of list from to list to.
func (w *Wheel[V]) moveAll(from, to uint16) {
	for {
		i := w.heads[from]
		if i == nilIndex {
			return
		}
		w.unlink(i)
		w.link(i, to)
	}
}

// alloc takes an entry from the free list, or grows the slab.
func (w *Wheel[V]) alloc() int32 {
	if i := w.free; i != nilIndex {
		w.free = w.slab[i].next
		return i
	}
	if len(w.slab) >= math.MaxInt32 {
		panic("timeouts: more than 2^31-1 pending timers")
	}
	w.slab = append(w.slab, entry[V]{gen: 1})
	return int32(len(w.slab) - 1)
}

// release returns unlinked entry i to the free list and invalidates its Timer.
func (w *Wheel[V]) release(i int32) {
	e := &w.slab[i]
	var zero V
	e.v = zero
	e.list = listFree
	e.gen++
	if e.gen == 0 {
		e.gen = 1
	}
	e.prev = nilIndex
	e.next = w.free
	w.free = i
	w.len--
}
