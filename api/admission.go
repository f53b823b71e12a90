package api

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/intents"
)

// Backlog is what admission reads: how long requests wait in Kafka before
// they are consumed, as the last sample of the consumer groups found it
// (router/lag's Sampler). Both methods must be quick and safe for
// concurrent use; ok false means unknown (never sampled, the group is
// missing, the sample failed).
type Backlog interface {
	// RouterBacklog is the age of the oldest request on the requests topic
	// that the router's consumer group has not consumed, and when it was
	// sampled: the same figure on every instance.
	RouterBacklog() (age time.Duration, sampledAt time.Time, ok bool)
	// AgentBacklog is the age of the oldest dispatch to agent that its
	// consumer group has not consumed, and when it was sampled.
	AgentBacklog(agent string) (age time.Duration, sampledAt time.Time, ok bool)
}

// AdmissionConfig is the rule of [Admission] (http.admission in the
// configuration file).
type AdmissionConfig struct {
	// BacklogFraction: an intent is refused when the router's backlog age
	// plus its agent's is at least this fraction of the intent's effective
	// timeout (in (0, 1]).
	BacklogFraction float64
	// Interval is how often the backlog is sampled (router.lag_interval):
	// a sample older than 3 intervals is unknown, which admits, and
	// Retry-After points at the next sample.
	Interval time.Duration
	// RouterSlack is subtracted from the router's backlog age: how far the
	// router group's committed offsets trail what it has read while it
	// keeps up (its commit cadence).
	RouterSlack time.Duration
	// AgentSlack is subtracted from each agent's backlog age, likewise.
	AgentSlack time.Duration
}

// Admission refuses an intent before anything is published when the
// backlog in front of it says it would most likely expire unread (see the
// README's "Admission"). A nil *Admission admits everything. It is safe
// for concurrent use.
type Admission struct {
	cfg     AdmissionConfig
	backlog Backlog
	clock   clockwork.Clock
	refused *prometheus.CounterVec // reason
}

// Reasons of a refusal: the larger of the two waits.
const (
	ReasonRouterBacklog = "router_backlog" // intents wait for a router to read them
	ReasonAgentBacklog  = "agent_backlog"  // dispatches wait for the agent to read them
)

// NewAdmission returns an Admission of cfg reading b, with its metric
// registered with reg; clock is when "now" is (the samples' age).
func NewAdmission(cfg AdmissionConfig, b Backlog, clock clockwork.Clock, reg prometheus.Registerer) (*Admission, error) {
	switch {
	case b == nil || clock == nil || reg == nil:
		return nil, fmt.Errorf("%w: NewAdmission needs a Backlog, a clock and a registerer", ErrInvalidConfig)
	case !(cfg.BacklogFraction > 0 && cfg.BacklogFraction <= 1):
		return nil, fmt.Errorf("%w: the admission backlog fraction %v is not in (0, 1]", ErrInvalidConfig, cfg.BacklogFraction)
	case cfg.Interval <= 0 || cfg.RouterSlack < 0 || cfg.AgentSlack < 0:
		return nil, fmt.Errorf("%w: the admission interval must be positive and the slacks not negative", ErrInvalidConfig)
	}
	refused, err := refusedCounter(reg) // waiting.go
	if err != nil {
		return nil, err
	}
	a := &Admission{cfg: cfg, backlog: b, clock: clock, refused: refused}
	for _, r := range []string{ReasonRouterBacklog, ReasonAgentBacklog} {
		a.refused.WithLabelValues(r)
	}
	return a, nil
}

// Refusal says why an intent was refused: by [Admission] for its backlog,
// or by a [WaitLimit] for the callers already waiting. Its Error is one
// line meant for the caller.
type Refusal struct {
	Reason                  string        // ReasonRouterBacklog, ReasonAgentBacklog, ReasonWaiting, ReasonMCPSessions, ReasonStreamConnections or ReasonReading
	Agent                   string        // the intent type's agent
	RouterAge               time.Duration // the router's backlog age, less its slack
	AgentAge                time.Duration // the agent's, less its slack (0 when unknown)
	RouterKnown, AgentKnown bool          // whether each age was measured (a recent sample)
	Timeout                 time.Duration // the intent's effective timeout
	RetryAfter              time.Duration // until the next sample, at least a second (waiting: a second)

	// ReasonWaiting, ReasonMCPSessions: the callers waiting or the
	// sessions open (the tenant's, when Tenant is set) and the bound they
	// reached.
	Waiting, Limit int
	Tenant         *string // the tenant whose bound was reached; nil: the instance's

	// ReasonWaiting when ByteLimit is set, and ReasonReading: the bytes
	// the waiting callers (the bodies being read) hold, the tenant's when
	// Tenant is set, the refused caller's, and the byte bound they would
	// pass.
	HeldBytes, Bytes, ByteLimit int64
}

// Backlog is the wait the refusal counted: RouterAge plus AgentAge.
func (r *Refusal) Backlog() time.Duration { return r.RouterAge + r.AgentAge }

func (r *Refusal) Error() string {
	switch r.Reason {
	case ReasonWaiting:
		return r.waitingError() // waiting.go
	case ReasonMCPSessions:
		return r.sessionsError() // sessionlimit.go
	case ReasonReading:
		return r.readingError() // reading.go
	case ReasonStreamConnections:
		return fmt.Sprintf("overloaded (stream_connections): this instance already holds %d stream connections (WebSocket and event streams), its http.websocket.max_connections; retry in %s, or on another instance",
			r.Waiting, r.RetryAfter)
	}
	wait := func(d time.Duration, known bool) string {
		if !known {
			return "an unknown while"
		}
		return d.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("overloaded (%s): intents wait %s for a router and %s for agent %s, %s in all against this intent's %s timeout, so it would most likely expire unread; nothing was published, retry in %s",
		r.Reason, wait(r.RouterAge, r.RouterKnown), wait(r.AgentAge, r.AgentKnown), r.Agent,
		r.Backlog().Round(time.Millisecond), r.Timeout, r.RetryAfter)
}

// Check decides for an intent of type t asking for timeoutMs (nil: the
// type's default): nil admits. Intent types it does not know are admitted
// (the router answers them). Check counts nothing: a caller that answers
// with the refusal calls Refused.
func (a *Admission) Check(t IntentTypeInfo, known bool, timeoutMs *int64) *Refusal {
	if a == nil || !known {
		return nil
	}
	now := a.clock.Now()
	stale := 3 * a.cfg.Interval
	var (
		oldest  time.Time
		counted bool
	)
	take := func(age time.Duration, at time.Time, ok bool, slack time.Duration) (time.Duration, bool) {
		if !ok || now.Sub(at) > stale {
			return 0, false // unknown admits
		}
		if !counted || at.Before(oldest) {
			oldest = at
		}
		counted = true
		return max(0, age-slack), true
	}
	r := &Refusal{Agent: t.Agent}
	routerAge, routerAt, routerOK := a.backlog.RouterBacklog()
	r.RouterAge, r.RouterKnown = take(routerAge, routerAt, routerOK, a.cfg.RouterSlack)
	agentAge, agentAt, agentOK := a.backlog.AgentBacklog(t.Agent)
	r.AgentAge, r.AgentKnown = take(agentAge, agentAt, agentOK, a.cfg.AgentSlack)
	if !counted {
		return nil
	}
	deadline := intents.Deadline(0, timeoutMs, intents.TimeoutPolicy{
		Default: time.Duration(t.TimeoutMs) * time.Millisecond,
		Min:     time.Duration(t.MinTimeoutMs) * time.Millisecond, Max: time.Duration(t.MaxTimeoutMs) * time.Millisecond,
	})
	r.Timeout = time.Duration(deadline) * time.Millisecond
	if r.Timeout <= 0 || float64(r.Backlog()) < a.cfg.BacklogFraction*float64(r.Timeout) {
		return nil
	}
	r.Reason = ReasonRouterBacklog
	if r.AgentAge > r.RouterAge {
		r.Reason = ReasonAgentBacklog
	}
	next := oldest.Add(a.cfg.Interval).Sub(now)
	r.RetryAfter = time.Duration(math.Ceil(max(next, time.Second).Seconds())) * time.Second
	return r
}

// Refused counts r in switchboard_api_admission_refused_total.
func (a *Admission) Refused(r *Refusal) { a.refused.WithLabelValues(r.Reason).Inc() }

// writeRefusal answers 503 with Retry-After and the refusal as the error.
func writeRefusal(w http.ResponseWriter, r *Refusal) {
	w.Header().Set("Retry-After", strconv.Itoa(int(r.RetryAfter/time.Second)))
	body := errorBody{Code: codeOverloaded, Message: r.Error(), Reason: r.Reason}
	if r.Reason == ReasonRouterBacklog || r.Reason == ReasonAgentBacklog {
		ms := r.Backlog().Milliseconds()
		body.BacklogMs = &ms
	}
	writeJSON(w, http.StatusServiceUnavailable, errorResponse{Error: body})
}
