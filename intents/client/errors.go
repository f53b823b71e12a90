package client

import "errors"

// ErrNoAnswer is what a Handler returns to send no response at all, as an
// agent that crashed or lost the request would: Switchboard then times the
// intent out and answers with its fallback.
var ErrNoAnswer = errors.New("client: no answer")

// ErrCancelled is the cause (context.Cause) of a handler's context when
// Switchboard cancelled its intent; the error wraps it with the reason.
var ErrCancelled = errors.New("client: intent cancelled")

// ErrStopAbandoned is returned by Agent.Run when its stop (the handlers'
// return, the answers' acknowledgements, the last commit, leaving the group)
// did not finish within its bound, most often because the broker is gone.
// What was not committed is read again by whoever serves the topic next.
var ErrStopAbandoned = errors.New("client: the agent's stop did not finish in time; abandoned")

// ErrNoResult is returned by Await when ctx ends before the result arrives.
var ErrNoResult = errors.New("client: no result before the deadline")

// ErrUndecodableResult is returned by Await and Follow when the intent's
// result arrived (a record under its key) but could not be decoded: most
// often an Avro record whose schema the registry could not give.
var ErrUndecodableResult = errors.New("client: the result arrived but could not be decoded")
