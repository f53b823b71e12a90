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
// same intent_id). maxIdempotencyKeysPerTenant caps one tenant's: past it
// its own oldest are forgotten, so that one tenant's flood of keys cannot
// push out another's (whose retry would then publish a second intent).
const (
	maxIdempotencyKeys          = 100_000
	maxIdempotencyKeysPerTenant = 10_000
)

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

	mu        sync.Mutex
	keys      map[string]*idemEntry
	order     []*idemEntry // in insertion order, for expiry
	perTenant map[string]*tenantKeys
}

// tenantKeys is one tenant's remembered keys: how many, and in insertion
// order (entries already forgotten are skipped, and dropped when they
// outnumber the live ones).
type tenantKeys struct {
	n     int
	order []*idemEntry
}

type idemEntry struct {
	key       string
	tenant    string
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
	return &idempotency{clock: clock, window: window, keys: map[string]*idemEntry{}, perTenant: map[string]*tenantKeys{}}
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
func (m *idempotency) claim(ctx context.Context, tenant, key, id string, explicitID bool, fp [32]byte) (string, func(bool), error) {
	for {
		m.mu.Lock()
		m.expire()
		e, ok := m.keys[key]
		if !ok {
			e = &idemEntry{key: key, tenant: tenant, id: id, fp: fp, done: make(chan struct{})}
			m.add(e)
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
		m.forget(e)
	}
	close(e.done)
}

// add remembers e, forgetting its tenant's oldest key first if the tenant
// holds maxIdempotencyKeysPerTenant. Called with mu held.
func (m *idempotency) add(e *idemEntry) {
	tk := m.perTenant[e.tenant]
	if tk == nil {
		tk = &tenantKeys{}
		m.perTenant[e.tenant] = tk
	}
	for tk.n >= maxIdempotencyKeysPerTenant && len(tk.order) > 0 {
		old := tk.order[0]
		tk.order = tk.order[1:]
		if m.keys[old.key] == old {
			m.forget(old)
		}
	}
	if len(tk.order) > 2*tk.n+64 {
		kept := make([]*idemEntry, 0, tk.n+1)
		for _, x := range tk.order {
			if m.keys[x.key] == x {
				kept = append(kept, x)
			}
		}
		tk.order = kept
	}
	m.keys[e.key] = e
	m.order = append(m.order, e)
	tk.order = append(tk.order, e)
	tk.n++
}

// forget drops e, which m.keys holds. Called with mu held.
func (m *idempotency) forget(e *idemEntry) {
	delete(m.keys, e.key)
	if tk := m.perTenant[e.tenant]; tk != nil {
		if tk.n--; tk.n <= 0 {
			delete(m.perTenant, e.tenant)
		}
	}
}

// expire forgets keys past their window, and the oldest beyond the cap.
// Called with mu held.
func (m *idempotency) expire() {
	now := m.clock.Now().UnixNano()
	i := 0
	for ; i < len(m.order); i++ {
		e := m.order[i]
		if m.keys[e.key] != e {
			continue // a failed first attempt, or forgotten for its tenant's cap
		}
		if e.expires == 0 || (len(m.keys) <= maxIdempotencyKeys && e.expires > now) {
			break // in progress, or neither expired nor over the cap
		}
		m.forget(e)
	}
	if i > 0 {
		m.order = append(m.order[:0], m.order[i:]...)
	}
	if len(m.order) > 2*len(m.keys)+1024 { // refs forgotten for their tenant's cap
		kept := m.order[:0]
		for _, e := range m.order {
			if m.keys[e.key] == e {
				kept = append(kept, e)
			}
		}
		clear(m.order[len(kept):])
		m.order = kept
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
	tenant := deref(req.Tenant)
	k = tenant + "\x00" + k
	id, finish, err := s.idem.claim(r.Context(), tenant, k, req.IntentID, explicitID, fp)
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
