package lookup

import "errors"

var (
	// ErrOpen wraps why [Open] could not open a store: the directory
	// cannot be created, or another process holds it.
	ErrOpen = errors.New("lookup: cannot open the store")

	// ErrRead wraps a failed read of the store.
	ErrRead = errors.New("lookup: reading the store")

	// ErrWrite wraps a failed write of the store.
	ErrWrite = errors.New("lookup: writing the store")

	// ErrSource wraps a failure of the [Source] the Materializer reads.
	ErrSource = errors.New("lookup: reading the topics")
)
