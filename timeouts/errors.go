package timeouts

import "errors"

// ErrInvalidTick is returned by NewWheel when the tick is not a whole, positive
// number of milliseconds.
var ErrInvalidTick = errors.New("timeouts: tick must be a positive whole number of milliseconds")

// ErrInvalidStart is returned by NewWheel when the start time is before the
// unix epoch. Wheel times are unix milliseconds; a negative start would let
// tick arithmetic wrap.
var ErrInvalidStart = errors.New("timeouts: start must be unix milliseconds at or after the epoch")
