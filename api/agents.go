package api

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/switchboard-mcp/switchboard/intents/payload"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// Catalog is the configuration GET /v1/agents and GET /v1/intent-types
// report, next to live counts. The caller builds it from its config.
type Catalog struct {
	Agents      []AgentInfo
	IntentTypes []IntentTypeInfo
}

// AgentInfo is one configured agent.
type AgentInfo struct {
	Name     string `json:"name"`
	Topic    string `json:"topic"`
	Encoding string `json:"encoding,omitempty"`
}

// IntentTypeInfo is one configured intent type. Fallback is "cache",
// "static", "cache+static" or "none". Title, Description, the schemas and
// Annotations describe it as a tool (payload.go, and the MCP endpoint);
// InputSchema, when set, is enforced on POST /v1/intents.
type IntentTypeInfo struct {
	Name         string           `json:"name"`
	Agent        string           `json:"agent"`
	TimeoutMs    int64            `json:"timeout_ms"`
	MinTimeoutMs int64            `json:"min_timeout_ms,omitempty"`
	MaxTimeoutMs int64            `json:"max_timeout_ms,omitempty"`
	Fallback     string           `json:"fallback"`
	Title        string           `json:"title,omitempty"`
	Description  string           `json:"description,omitempty"`
	InputSchema  *payload.Schema  `json:"input_schema,omitempty"`
	OutputSchema *payload.Schema  `json:"output_schema,omitempty"`
	Annotations  *ToolAnnotations `json:"annotations,omitempty"`
}

// ToolAnnotations are an intent type's MCP tool annotations: hints, never
// enforced. A nil field is not stated.
type ToolAnnotations struct {
	ReadOnly    *bool `json:"read_only,omitempty"`
	Destructive *bool `json:"destructive,omitempty"`
	Idempotent  *bool `json:"idempotent,omitempty"`
	OpenWorld   *bool `json:"open_world,omitempty"`
}

// IntentType returns the configured intent type called name.
func (c Catalog) IntentType(name string) (IntentTypeInfo, bool) {
	for _, t := range c.IntentTypes {
		if t.Name == name {
			return t, true
		}
	}
	return IntentTypeInfo{}, false
}

// WithCatalog sets what GET /v1/agents and GET /v1/intent-types report as
// configured. Default: nothing configured (live counts only).
func WithCatalog(c Catalog) Option { return func(o *options) { o.catalog = c } }

// WithAgentState adds f(agent) as the "state" of each agent in GET
// /v1/agents: the extension point for router-side state such as a circuit
// breaker's. f must be quick and safe for concurrent use; nil results are
// left out.
func WithAgentState(f func(agent string) any) Option { return func(o *options) { o.agentState = f } }

// WithAgentLag adds f(agent) as the "lag" of each agent in GET /v1/agents:
// how far its consumer group is behind its topic (router/lag's AgentLag).
// f must be quick and safe for concurrent use; nil results are left out.
func WithAgentLag(f func(agent string) any) Option { return func(o *options) { o.agentLag = f } }

// Counts are the live counts of an agent or intent type, from the results
// and timeouts this instance has read since it started, and the intents
// submitted through it that have no result yet.
type Counts struct {
	Resolved   int64            `json:"resolved"`
	ByOutcome  map[string]int64 `json:"by_outcome"`
	TimedOut   int64            `json:"timeout_events"`
	InFlight   int64            `json:"in_flight"`
	LastResult int64            `json:"last_resolved_at,omitempty"` // unix ms
}

// stats holds the live counts: of everyone (shown with authentication
// off) and by tenant (a caller sees its tenant's only). Guarded by
// Results.mu.
type stats struct {
	all      *tally
	tenants  map[string]*tally
	inflight map[intentKey]flight // intents submitted here with no result yet

	// In-flight intents expire ttl after their submission (the router may
	// drop an intent without a result: a duplicate, say): flights holds
	// them in submission order (entries that landed are skipped), and
	// perTenant counts them by tenant ("" for none) for the cap. clock is
	// nil until the Server sets it: nothing expires.
	clock     clockwork.Clock
	ttl       time.Duration
	flights   []flightRef
	perTenant map[string]int
}

// flight is an intent in flight: its type and when it was submitted (unix
// nanoseconds of the injected clock).
type flight struct {
	intentType string
	at         int64
}

type flightRef struct {
	key intentKey
	at  int64
}

// tally is the counts of one tenant, or of all.
type tally struct {
	byAgent map[string]*Counts
	byType  map[string]*Counts
}

func newTally() *tally { return &tally{byAgent: map[string]*Counts{}, byType: map[string]*Counts{}} }

// tallies returns the tallies an event of tenant counts in: all's, and the
// tenant's if it has one (beyond maxCounted tenants, new ones are counted
// in all's only).
func (s *stats) tallies(tenant string) []*tally {
	if tenant == "" {
		return []*tally{s.all}
	}
	t, ok := s.tenants[tenant]
	if !ok {
		if len(s.tenants) >= maxCounted {
			return []*tally{s.all}
		}
		t = newTally()
		s.tenants[tenant] = t
	}
	return []*tally{s.all, t}
}

// maxInflight caps the intents tracked as in flight, maxInflightPerTenant
// those of one tenant: past either, new ones are not counted.
const (
	maxInflight          = 100_000
	maxInflightPerTenant = 10_000
)

func newStats() stats {
	return stats{all: newTally(), tenants: map[string]*tally{}, inflight: map[intentKey]flight{}, perTenant: map[string]int{}}
}

// maxCounted caps the agents and intent types counted: results name them
// as clients wrote them (a rejected intent's type is anything), so beyond
// this many, new names share the counts of "" (left out of the lists).
const maxCounted = 1024

func counts(m map[string]*Counts, k string) *Counts {
	c, ok := m[k]
	if !ok {
		if len(m) >= maxCounted {
			k = ""
			if c, ok = m[k]; ok {
				return c
			}
		}
		c = &Counts{ByOutcome: map[string]int64{}}
		m[k] = c
	}
	return c
}

func (s *stats) addResult(res *schemas.IntentResult) {
	for _, tl := range s.tallies(tenantOf(res)) {
		for _, c := range []*Counts{counts(tl.byAgent, res.Agent), counts(tl.byType, res.IntentType)} {
			c.Resolved++
			c.ByOutcome[string(res.Outcome)]++
			c.LastResult = max(c.LastResult, res.Timeline.ResolvedAt)
		}
	}
	s.land(keyOf(res))
}

// land ends an intent's flight, if it is in flight.
func (s *stats) land(k intentKey) {
	f, ok := s.inflight[k]
	if !ok {
		return
	}
	for _, tl := range s.tallies(k.tenant) {
		counts(tl.byType, f.intentType).InFlight--
	}
	if s.perTenant[k.tenant]--; s.perTenant[k.tenant] <= 0 {
		delete(s.perTenant, k.tenant)
	}
	delete(s.inflight, k)
}

// expire ends the flights submitted more than ttl ago, and drops the
// references of landed ones once they outnumber the flights.
func (s *stats) expire() {
	if s.clock != nil {
		cut := s.clock.Now().Add(-s.ttl).UnixNano()
		n := 0
		for ; n < len(s.flights) && s.flights[n].at <= cut; n++ {
			ref := s.flights[n]
			if f, ok := s.inflight[ref.key]; ok && f.at == ref.at {
				s.land(ref.key)
			}
		}
		s.flights = s.flights[n:]
	}
	if len(s.flights) > 2*len(s.inflight)+1024 {
		kept := make([]flightRef, 0, len(s.inflight))
		for _, ref := range s.flights {
			if f, ok := s.inflight[ref.key]; ok && f.at == ref.at {
				kept = append(kept, ref)
			}
		}
		s.flights = kept
	}
}

// expireInflight makes in-flight intents expire ttl after their submission,
// on clock.
func (r *Results) expireInflight(clock clockwork.Clock, ttl time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.clock, r.stats.ttl = clock, ttl
}

func (s *stats) addTimeout(t *schemas.IntentTimeout) {
	tenant := ""
	if t.Tenant != nil {
		tenant = *t.Tenant
	}
	for _, tl := range s.tallies(tenant) {
		counts(tl.byAgent, t.Agent).TimedOut++
		counts(tl.byType, t.IntentType).TimedOut++
	}
}

// submitted counts an intent (tenant and id) published through this
// instance as in flight until its result arrives.
func (r *Results) submitted(k intentKey, intentType string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.st.get(k); e != nil && e.res != nil {
		return
	}
	r.stats.expire()
	tenant := k.tenant
	if _, ok := r.stats.inflight[k]; ok || len(r.stats.inflight) >= maxInflight || r.stats.perTenant[tenant] >= maxInflightPerTenant {
		return
	}
	var at int64
	if r.stats.clock != nil {
		at = r.stats.clock.Now().UnixNano()
	}
	r.stats.inflight[k] = flight{intentType: intentType, at: at}
	r.stats.flights = append(r.stats.flights, flightRef{key: k, at: at})
	r.stats.perTenant[tenant]++
	for _, tl := range r.stats.tallies(tenant) {
		counts(tl.byType, intentType).InFlight++
	}
}

// snapshot copies the counts p may see: all with p nil (authentication
// off), else its tenant's.
func (r *Results) snapshot(p *principal, byAgent bool) map[string]Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.expire()
	tl := r.stats.all
	if p != nil {
		if tl = r.stats.tenants[p.tenant]; tl == nil {
			return map[string]Counts{}
		}
	}
	m := tl.byType
	if byAgent {
		m = tl.byAgent
	}
	out := make(map[string]Counts, len(m))
	for k, c := range m {
		cc := *c
		cc.ByOutcome = make(map[string]int64, len(c.ByOutcome))
		for o, n := range c.ByOutcome {
			cc.ByOutcome[o] = n
		}
		out[k] = cc
	}
	return out
}

type agentView struct {
	AgentInfo
	Configured bool   `json:"configured"`
	Counts     Counts `json:"counts"`
	State      any    `json:"state,omitempty"`
	Lag        any    `json:"lag,omitempty"`
}

type intentTypeView struct {
	IntentTypeInfo
	Configured bool   `json:"configured"`
	Counts     Counts `json:"counts"`
}

// listAgents serves GET /v1/agents: the configured agents, and any agent
// seen in results, with live counts (with authentication on, those of the
// caller's tenant: results, timeouts, intents in flight).
func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) {
	live := s.results.snapshot(principalFrom(r.Context()), true)
	out := []agentView{}
	for _, a := range s.catalog.Load().Agents {
		v := agentView{AgentInfo: a, Configured: true, Counts: zeroCounts(live[a.Name])}
		delete(live, a.Name)
		out = append(out, v)
	}
	for name, c := range live {
		if name != "" {
			out = append(out, agentView{AgentInfo: AgentInfo{Name: name}, Counts: c})
		}
	}
	slices.SortFunc(out, func(a, b agentView) int { return strings.Compare(a.Name, b.Name) })
	if s.agentState != nil {
		for i := range out {
			out[i].State = s.agentState(out[i].Name)
		}
	}
	if s.agentLag != nil {
		for i := range out {
			out[i].Lag = s.agentLag(out[i].Name)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"agents": out})
}

// listIntentTypes serves GET /v1/intent-types: the configured intent types,
// and any seen in results, with live counts (the caller's tenant's, as for
// agents).
func (s *Server) listIntentTypes(w http.ResponseWriter, r *http.Request) {
	live := s.results.snapshot(principalFrom(r.Context()), false)
	out := []intentTypeView{}
	for _, t := range s.catalog.Load().IntentTypes {
		out = append(out, intentTypeView{IntentTypeInfo: t, Configured: true, Counts: zeroCounts(live[t.Name])})
		delete(live, t.Name)
	}
	for name, c := range live {
		if name != "" {
			out = append(out, intentTypeView{IntentTypeInfo: IntentTypeInfo{Name: name}, Counts: c})
		}
	}
	slices.SortFunc(out, func(a, b intentTypeView) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, map[string]any{"intent_types": out})
}

func zeroCounts(c Counts) Counts {
	if c.ByOutcome == nil {
		c.ByOutcome = map[string]int64{}
	}
	return c
}
