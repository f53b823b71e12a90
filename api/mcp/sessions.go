package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/api"
)

// sessionPrune is how often, at most, the endpoint looks for sessions
// gone by themselves that closingEventStore did not report (one closed
// before its initialize's answer recorded it) to give their slots back:
// at most once a second, on an initialize.
const sessionPrune = time.Second

// openSessions maps the sessions holding a slot of the session limit to
// the slot's release.
type openSessions struct {
	mu        sync.Mutex
	release   map[string]func()
	lastPrune time.Time
}

// admitSession takes a session slot for an initialize of tenant (nil:
// unauthenticated), or answers its refusal: HTTP 503 with Retry-After and
// a JSON-RPC error (code -32000, data reason "mcp_sessions") to the
// initialize's id, and returns nil.
func (e *Endpoint) admitSession(w http.ResponseWriter, tenant *string, msgs []wireMsg) (release func()) {
	if e.cfg.SessionLimit == nil {
		return func() {}
	}
	e.pruneSessions(false)
	release, ref := e.cfg.SessionLimit.Acquire(tenant)
	if ref == nil {
		return release
	}
	id := json.RawMessage("null")
	for _, m := range msgs {
		if m.Method == "initialize" && len(m.ID) > 0 {
			id = m.ID
		}
	}
	data, _ := json.Marshal(map[string]any{"reason": ref.Reason, "retry_after_ms": ref.RetryAfter.Milliseconds()})
	body, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *jsonrpc.Error  `json:"error"`
	}{"2.0", id, &jsonrpc.Error{Code: codeOverloaded, Message: ref.Error(), Data: data}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", strconv.Itoa(int(ref.RetryAfter.Seconds())))
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(body)
	return nil
}

// sessionOpened gives the session sid the slot its initialize took.
func (e *Endpoint) sessionOpened(sid string, release func()) {
	e.open.mu.Lock()
	defer e.open.mu.Unlock()
	if old, ok := e.open.release[sid]; ok { // never: the SDK's ids are random
		old()
	}
	e.open.release[sid] = release
}

// sessionClosed gives back the slot of the session sid, which the SDK
// ended (closingEventStore), if it holds one, and forgets its negotiated
// version.
func (e *Endpoint) sessionClosed(sid string) {
	e.versions.forget(sid)
	e.open.mu.Lock()
	defer e.open.mu.Unlock()
	if release, ok := e.open.release[sid]; ok {
		release()
		delete(e.open.release, sid)
	}
}

// closingEventStore is the session handler's event store, which also hears
// when the SDK ends a session: a DELETE, idle past SessionTimeout (the
// SDK's own timer), a failed initialize, Shutdown. The SDK calls
// SessionClosed when it closes the session's connection, after the
// session's in-flight requests, and the slot comes back then, not at the
// next initialize's prune.
type closingEventStore struct {
	sdk.EventStore
	closed func(sid string)
}

// SessionClosed implements [sdk.EventStore]: it drops the session's events,
// then gives its slot back.
func (s closingEventStore) SessionClosed(ctx context.Context, sid string) error {
	err := s.EventStore.SessionClosed(ctx, sid)
	s.closed(sid)
	return err
}

// pruneSessions gives back the slots of sessions the SDK no longer holds
// (deleted, closed by their idle timeout or a failed initialize, or at
// shutdown): at once when now is true, else at most every sessionPrune.
// It holds open.mu while it reads the SDK's sessions, so a session
// recorded by sessionOpened (after the SDK added it) is never taken for
// gone.
func (e *Endpoint) pruneSessions(now bool) {
	e.open.mu.Lock()
	defer e.open.mu.Unlock()
	t := e.cfg.Clock.Now()
	if len(e.open.release) == 0 || (!now && t.Sub(e.open.lastPrune) < sessionPrune) {
		return
	}
	e.open.lastPrune = t
	live := make(map[string]bool, len(e.open.release))
	for ss := range e.server.Sessions() {
		live[ss.ID()] = true
	}
	for sid, release := range e.open.release {
		if !live[sid] {
			release()
			delete(e.open.release, sid)
		}
	}
}

// hasInitialize reports whether body (one message or a batch) holds an
// initialize request. It reads nothing but the methods, so a message the
// endpoint's peek cannot read (a field of an unexpected type the SDK
// ignores) is still counted.
func hasInitialize(body []byte) bool {
	type method struct {
		Method string `json:"method"`
	}
	var one method
	if json.Unmarshal(body, &one) == nil {
		return one.Method == "initialize"
	}
	var batch []method
	_ = json.Unmarshal(body, &batch)
	for _, m := range batch {
		if m.Method == "initialize" {
			return true
		}
	}
	return false
}

// tenantSlot is the tenant an HTTP request's session slot counts against:
// nil without a credential (authentication off).
func tenantSlot(r *http.Request) *string {
	if t, ok := api.TenantFrom(r.Context()); ok {
		return &t
	}
	return nil
}

// sessionCapture records the session id an initialize response assigns:
// with its negotiated version (when version is set), and to opened (when
// set), which then holds the session's slot.
type sessionCapture struct {
	http.ResponseWriter
	version  string
	versions *sessionVersions
	opened   func(sid string)
	recorded bool // opened was called
	done     bool
}

func (c *sessionCapture) WriteHeader(code int) {
	if !c.done {
		c.done = true
		if sid := c.Header().Get("Mcp-Session-Id"); sid != "" && code/100 == 2 {
			if c.version != "" {
				c.versions.set(sid, c.version)
			}
			if c.opened != nil {
				c.opened(sid)
				c.recorded = true
			}
		}
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *sessionCapture) Write(b []byte) (int, error) {
	if !c.done {
		c.WriteHeader(http.StatusOK)
	}
	return c.ResponseWriter.Write(b)
}

func (c *sessionCapture) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *sessionCapture) Unwrap() http.ResponseWriter { return c.ResponseWriter }
