package embedded

import "errors"

var (
	// ErrBrokerListen means the broker could not listen on its port (another
	// broker or 'switchboard dev' holds it, most often).
	ErrBrokerListen = errors.New("embedded: starting the broker")
	// ErrRegistryListen means the schema registry could not listen on its
	// address.
	ErrRegistryListen = errors.New("embedded: starting the schema registry")
)
