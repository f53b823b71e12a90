package api

import "errors"

var (
	// ErrServerClosed is returned by [Server.Run] when it is called after
	// [Server.Shutdown].
	ErrServerClosed = errors.New("api: server closed")

	// ErrAlreadyRunning is returned by [Server.Run] when the server is
	// already running: a Server serves one listener, once.
	ErrAlreadyRunning = errors.New("api: server already running")

	// ErrInvalidConfig is wrapped by every error of [Config.Validate] and by
	// [New] when a dependency or an option is missing or invalid.
	ErrInvalidConfig = errors.New("api: invalid config")

	// errBodyTimeout wraps the error of a request body's read that
	// Config.BodyReadTimeout ended (body.go).
	errBodyTimeout = errors.New("api: request body read timed out")

	// errNoSyscallConn: the connection under a counted connection has no
	// descriptor (listener.go).
	errNoSyscallConn = errors.New("api: the connection has no descriptor")

	// errAborted ends a slow client's writes: its writer closes it with
	// 1013 (streamSocket.abort).
	errAborted = errors.New("api: writes to a slow client aborted")

	// errTooManySubscriptions is what a WebSocket client gets when a
	// subscription would take it over Config.MaxSubscriptions.
	errTooManySubscriptions = errors.New("too many subscriptions")
)
