package bench

import (
	"context"
	"math"
	"math/bits"
	"time"

	"github.com/jonboulle/clockwork"
)

// pacer is the arithmetic of open-loop arrivals: at rate r from time from,
// intent number base+k (k = 0, 1, …) is due at from + (k+1)/r, whatever
// happened to the intents before it. Rates are kept in thousandths of an
// intent per second and the arithmetic is exact integer arithmetic, so "how
// many by when" has no rounding drift over a long run.
type pacer struct {
	from      time.Time
	base      int64 // intents due before from
	rateMilli uint64
}

func newPacer(from time.Time, rate float64) *pacer {
	p := &pacer{from: from}
	p.rateMilli = milliRate(rate)
	return p
}

func milliRate(rate float64) uint64 { return uint64(math.Round(max(rate, 0) * 1000)) }

// due is how many intents are due by now: the number whose scheduled time is
// not after now.
func (p *pacer) due(now time.Time) int64 {
	el := now.Sub(p.from)
	if el <= 0 || p.rateMilli == 0 {
		return p.base
	}
	hi, lo := bits.Mul64(uint64(el), p.rateMilli)
	q, _ := bits.Div64(hi, lo, 1e12) // ns × milli-intents/s → intents
	return p.base + int64(q)
}

// at is when intent seq is due (seq >= the base of the current rate).
func (p *pacer) at(seq int64) time.Time {
	if p.rateMilli == 0 {
		return p.from
	}
	hi, lo := bits.Mul64(uint64(seq-p.base+1), 1e12)
	q, rem := bits.Div64(hi, lo, p.rateMilli)
	if rem != 0 {
		q++ // the first nanosecond at or after the exact time
	}
	return p.from.Add(time.Duration(q))
}

// setRate changes the rate from now on; intents already due stay due.
func (p *pacer) setRate(now time.Time, rate float64) {
	p.base = p.due(now)
	p.from = now
	p.rateMilli = milliRate(rate)
}

// resume restarts the schedule at now after a pause in which nothing was
// released: the intents that fell due during it are not sent (no burst).
func (p *pacer) resume(now time.Time, released int64) {
	p.base = released
	p.from = now
}

// schedule releases intents as the pacer makes them due, on every tick of
// clock, independently of what happens to the intents it released: a slow
// system shows as latency, not as a lower offered rate.
type schedule struct {
	clock clockwork.Clock
	tick  time.Duration
	// release hands over intent seq, due at the given time. It should not
	// block: the schedule falls behind while it does.
	release func(seq int64, due time.Time)
	// limit caps the intents released (0: no cap), so a fixed-rate run sends
	// exactly rate × duration however late its last tick fires.
	limit int64
}

// run releases intents at p's rate from now until ctx ends or each, called
// after every tick with the time and the number released so far, returns
// true. each may change p's rate. run returns the number released.
func (s *schedule) run(ctx context.Context, p *pacer, each func(now time.Time, released int64) bool) int64 {
	t := s.clock.NewTicker(s.tick)
	defer t.Stop()
	var released int64
	for {
		select {
		case <-ctx.Done():
			return released
		case <-t.Chan():
		}
		now := s.clock.Now()
		due := p.due(now)
		if s.limit > 0 {
			due = min(due, s.limit)
		}
		for ; released < due; released++ {
			s.release(released, p.at(released))
		}
		if each(now, released) {
			return released
		}
	}
}
