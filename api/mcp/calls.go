package mcp

import (
	"encoding/json"
	"strings"
	"sync"
)

// callRegistry maps the calls in flight on this instance, by (tenant,
// session, JSON-RPC id), to their intent ids: notifications/cancelled
// names a request, not an intent.
type callRegistry struct {
	mu    sync.Mutex
	calls map[string]*inFlight
}

// inFlight is one call in flight: its intent, and whether its cancel
// record was written (once: by the notification or by the closed request,
// whichever comes first).
type inFlight struct {
	intentID  string
	cancelled bool
	gone      chan struct{} // closed by abandon: the call stops waiting
	abandoned bool
}

func newCallRegistry() *callRegistry { return &callRegistry{calls: map[string]*inFlight{}} }

func callKey(tenant, session string, id json.RawMessage) string {
	return tenant + "\x00" + session + "\x00" + strings.TrimSpace(string(id))
}

// add registers a call in flight and returns the channel abandon closes
// (nil for a call without an id: never) and the call's removal.
func (c *callRegistry) add(tenant, session string, id json.RawMessage, intentID string) (<-chan struct{}, func()) {
	if len(id) == 0 {
		return nil, func() {}
	}
	k := callKey(tenant, session, id)
	f := &inFlight{intentID: intentID, gone: make(chan struct{})}
	c.mu.Lock()
	c.calls[k] = f
	c.mu.Unlock()
	return f.gone, func() {
		c.mu.Lock()
		if c.calls[k] == f {
			delete(c.calls, k)
		}
		c.mu.Unlock()
	}
}

// claimCancel returns the intent of the call in flight, and true if its
// cancel record is still to be written (the caller writes it).
func (c *callRegistry) claimCancel(tenant, session string, id json.RawMessage) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.calls[callKey(tenant, session, id)]
	if !ok || f.cancelled {
		return "", false
	}
	f.cancelled = true
	return f.intentID, true
}

// abandon tells the call in flight, if any, that its client is gone for
// its answer (the POST stream it was to come on was cut): it stops waiting.
func (c *callRegistry) abandon(tenant, session string, id json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.calls[callKey(tenant, session, id)]; ok && !f.abandoned {
		f.abandoned = true
		close(f.gone)
	}
}
