package lag

import "errors"

var (
	// ErrAlreadyStarted is returned by a second call to Sampler.Run.
	ErrAlreadyStarted = errors.New("lag: Run called twice")
	// ErrMissingDependency is returned by NewSampler without an Admin.
	ErrMissingDependency = errors.New("lag: NewSampler needs an Admin")
	// ErrBadGroup is returned by NewSampler for a group without an agent
	// name, a group id or a topic, or an agent named twice.
	ErrBadGroup = errors.New("lag: bad group")
	// ErrBadInterval is returned by NewSampler for an interval that is not
	// positive.
	ErrBadInterval = errors.New("lag: the interval must be positive")
)

// ErrHangingTransaction is what HangWatch.Err wraps while a partition's
// last stable offset is stuck behind its high watermark.
var ErrHangingTransaction = errors.New("lag: hanging transaction")
