package router

import "errors"

var (
	// ErrMissingDependency is returned by New when the config, codec, source
	// or sink is nil.
	ErrMissingDependency = errors.New("router: New needs a config, a codec, a source and a sink")
	// ErrAlreadyStarted is returned by a second call to Run.
	ErrAlreadyStarted = errors.New("router: Run called twice")
	// ErrNotStarted is what Ready reports before Run.
	ErrNotStarted = errors.New("router: not started")
	// ErrStopped is what Ready reports after Run returned.
	ErrStopped = errors.New("router: stopped")
	// ErrNeedTxSink is returned by New when delivery is exactly_once and the
	// sink cannot do transactions.
	ErrNeedTxSink = errors.New("router: exactly_once needs a transactional sink (TxSink)")
	// ErrNeedsRestart is returned by Reconfigure when the new configuration
	// changes keys a running router cannot take (config.RestartKeys); the
	// error names them. The router keeps its configuration.
	ErrNeedsRestart = errors.New("router: the change needs a restart")
)
