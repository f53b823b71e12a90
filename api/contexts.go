package api

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"

	"github.com/switchboard-mcp/switchboard/contexts"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// ContextStore is what GET /v1/contexts/{entity_id} reads. *contexts.Store
// implements it. Its methods must be safe for concurrent use.
type ContextStore interface {
	// Get returns what the store holds for entity in tenant's namespace
	// ("" for none).
	Get(tenant, entity string) (contexts.Entry, bool)
	// Ready returns nil once the store has caught up with its topic.
	Ready() error
}

// WithContexts serves GET /v1/contexts/{entity_id} from s. Without it the
// route answers 404 not_found.
func WithContexts(s ContextStore) Option { return func(o *options) { o.contexts = s } }

// contextBody is the body of GET /v1/contexts/{entity_id}: the snapshot, its
// age and its freshness against the store's max age.
type contextBody struct {
	*schemas.ContextSnapshot
	AgeMs  int64                 `json:"age_ms"`
	Status schemas.ContextStatus `json:"status"`
}

// getContext serves GET /v1/contexts/{entity_id}: the entity in the
// caller's tenant's namespace. Another tenant's entity of that id answers
// exactly as an unknown one: its existence is not revealed. With
// authentication off there are no tenants: the entities without one.
func (s *Server) getContext(w http.ResponseWriter, r *http.Request) {
	if s.contexts == nil {
		writeError(w, http.StatusNotFound, codeNotFound, "this instance keeps no context store", "")
		return
	}
	id := chi.URLParam(r, "entity_id")
	if r.URL.RawPath != "" {
		if u, err := url.PathUnescape(id); err == nil {
			id = u
		}
	}
	tenant := ""
	if p := principalFrom(r.Context()); p != nil {
		tenant = p.tenant
	}
	e, ok := s.contexts.Get(tenant, id)
	if !ok {
		if err := s.contexts.Ready(); err != nil {
			writeError(w, http.StatusServiceUnavailable, codeUnavailable,
				fmt.Sprintf("no context for entity %q yet, and the context store is not ready: %v", id, err), "")
			return
		}
		writeError(w, http.StatusNotFound, codeNotFound, fmt.Sprintf("no context for entity %q", id), "")
		return
	}
	writeJSON(w, http.StatusOK, contextBody{ContextSnapshot: e.Snapshot, AgeMs: e.Age.Milliseconds(), Status: e.Status})
}
