package api

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// DefaultIdempotencyWindow is how long POST /v1/intents remembers an
// Idempotency-Key or an intent_id (the router's default dedup_window, which
// stands behind it).
const DefaultIdempotencyWindow = 10 * time.Minute

// maxIdempotencyKeys caps the keys remembered; past it the oldest are
// forgotten early (the router's dedup still drops a second publish of the
// same intent_id).
const maxIdempotencyKeys = 100_000

// maxIdempotencyKeyLen caps an Idempotency-Key header.
const maxIdempotencyKeyLen = 255

// Error codes of idempotent submission.
const (
	codeIdempotencyMismatch = "idempotency_key_reused" // 422: the key (or intent_id) came with a different intent
)

// WithIdempotencyWindow sets how long POST /v1/intents remembers an
// Idempotency-Key or intent_id: a repeat within it publishes nothing and
// answers with the first request's intent id. Default:
// DefaultIdempotencyWindow.
func WithIdempotencyWindow(d time.Duration) Option {
	return func(o *options) { o.idempotencyWindow = d }
}

var errIdempotencyMismatch = errors.New("this key was used with a different intent")

// idempotency remembers, per key, the intent id it was given and a
// fingerprint of the intent, for a window on the injected clock.
type idempotency struct {
	clock  clockwork.Clock
	window time.Duration

	mu    sync.Mutex
	keys  map[string]*idemEntry
	order []string // keys in insertion order, for expiry
}

type idemEntry struct {
	id        string
	fp        [32]byte
	expires   int64         // unix nanos; 0 while the first publish is in progress
	published bool          // set before done closes
	done      chan struct{} // closed when the first publish has finished
}

func newIdempotency(clock clockwork.Clock, window time.Duration) *idempotency {
	if window <= 0 {
		window = DefaultIdempotencyWindow
	}
	return &idempotency{clock: clock, window: window, keys: map[string]*idemEntry{}}
}

// fingerprint hashes what makes an intent the same intent: every field but
// the id, the creation time and the trace context.
func fingerprint(req *schemas.IntentRequest) [32]byte {
	c := *req
	c.IntentID, c.CreatedAt, c.Traceparent = "", nil, nil
	b, _ := json.Marshal(&c)
	return sha256.Sum256(b)
}

// claim looks key up. For a new key it records id and returns a finish
// function the caller must call with whether the publish succeeded. For a
// known key it returns the intent id recorded (waiting for a publish in
// progress to finish; if that failed, the caller takes over with its id),
// and a nil finish: nothing to publish. A known key with another
// fingerprint, or with another explicit intent id, is errIdempotencyMismatch.
func (m *idempotency) claim(ctx context.Context, key, id string, explicitID bool, fp [32]byte) (string, func(bool), error) {
	for {
		m.mu.Lock()
		m.expire()
		e, ok := m.keys[key]
		if !ok {
			e = &idemEntry{id: id, fp: fp, done: make(chan struct{})}
			m.keys[key] = e
			m.order = append(m.order, key)
			m.mu.Unlock()
			return id, func(published bool) { m.finish(key, e, published) }, nil
		}
		m.mu.Unlock()
		if e.fp != fp || (explicitID && e.id != id) {
			return "", nil, errIdempotencyMismatch
		}
		select {
		case <-e.done:
		case <-ctx.Done():
			return "", nil, ctx.Err()
		}
		if e.published {
			return e.id, nil, nil
		}
		// The first attempt failed and was forgotten: try again.
	}
}

func (m *idempotency) finish(key string, e *idemEntry, published bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e.published = published
	if published {
		e.expires = m.clock.Now().Add(m.window).UnixNano()
	} else if m.keys[key] == e {
		delete(m.keys, key)
	}
	close(e.done)
}

// expire forgets keys past their window, and the oldest beyond the cap.
// Called with mu held.
func (m *idempotency) expire() {
	now := m.clock.Now().UnixNano()
	i := 0
	for ; i < len(m.order); i++ {
		k := m.order[i]
		e, ok := m.keys[k]
		if !ok {
			continue // a failed first attempt, already gone
		}
		if e.expires == 0 || (len(m.order)-i <= maxIdempotencyKeys && e.expires > now) {
			break // in progress, or neither expired nor over the cap
		}
		delete(m.keys, k)
	}
	if i > 0 {
		m.order = append(m.order[:0], m.order[i:]...)
	}
}

// claimIdempotency claims the request's Idempotency-Key, or its intent_id
// when it has no key. It returns the intent id to answer with and, for a
// first request, the finish function (nil for a repeat). On failure it has
// answered and returns false.
func (s *Server) claimIdempotency(w http.ResponseWriter, r *http.Request, key string, req *schemas.IntentRequest,
	explicitID bool, fp [32]byte,
) (string, func(bool), bool) {
	k := "key:" + key
	if key == "" {
		if !explicitID {
			return req.IntentID, func(bool) {}, true
		}
		k = "id:" + req.IntentID
	}
	// Keys are the intent's tenant's (the credential's; the body's with
	// authentication off): another tenant's same key is another intent.
	k = deref(req.Tenant) + "\x00" + k
	id, finish, err := s.idem.claim(r.Context(), k, req.IntentID, explicitID, fp)
	switch {
	case errors.Is(err, errIdempotencyMismatch):
		what := "Idempotency-Key"
		if key == "" {
			what = "intent_id"
		}
		writeError(w, http.StatusUnprocessableEntity, codeIdempotencyMismatch,
			fmt.Sprintf("this %s was used for a different intent within the last %v", what, s.idem.window), what)
		return "", nil, false
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "gave up waiting for the first request with this key", "")
		return "", nil, false
	}
	return id, finish, true
}
