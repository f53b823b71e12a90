package mcp

import "errors"

var (
	// ErrInvalidConfig is wrapped by [New]'s errors: a dependency is missing.
	ErrInvalidConfig = errors.New("mcp: invalid config")

	// ErrNoURL is returned by [ServeStdio] without a Switchboard URL.
	ErrNoURL = errors.New("mcp: no Switchboard URL to forward to")
)
