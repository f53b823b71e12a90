package contexts

import "errors"

var (
	// ErrNotCaughtUp is what Store.Ready returns until the store has read
	// the snapshot topic up to where it ended when reading began.
	ErrNotCaughtUp = errors.New("contexts: the snapshot store has not caught up with the topic yet")

	// ErrStopped is what Store.Ready returns once Run has returned.
	ErrStopped = errors.New("contexts: the snapshot store stopped")

	// ErrAlreadyStarted is returned by a second call to Run.
	ErrAlreadyStarted = errors.New("contexts: already started")

	// ErrMissingDependency is returned by a constructor given a nil
	// dependency.
	ErrMissingDependency = errors.New("contexts: missing dependency")

	// ErrInvalidEntity is returned by Publisher.Publish for an empty entity
	// id or a feature that is not a finite number.
	ErrInvalidEntity = errors.New("contexts: invalid snapshot")
)

// ErrInvalidAggregate is wrapped by the errors of NewAggregator, and by
// DecodeEvent for an event it cannot read.
var ErrInvalidAggregate = errors.New("contexts: invalid aggregate")
