// Package deadletter reads the dead-letter topic and puts its records back:
// what 'switchboard dlq list' and 'switchboard dlq replay' are built on.
//
// It owns the reading side of the dead-letter headers the router writes
// (port.HeaderOriginal*, port.HeaderErrorClass and HeaderErrorMessage):
// a Letter is a dead-letter record with them decoded; a Filter selects
// letters; Replay re-injects them into their original topic (or another)
// with their key, value and headers, minus the dead-letter ones, plus
// HeaderReplayedFrom.
//
// It does not write dead letters (the router does, see router/engine.go) and
// does not decide anything about a record's content: a replayed record meets
// the router again, which routes it, or dead-letters it again, as for any
// other.
package deadletter
