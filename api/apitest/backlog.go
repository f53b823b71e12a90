package apitest

import (
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/api"
)

// Backlog is an api.Backlog a test sets: the router's backlog and each
// agent's, with when they were sampled. Unset figures are unknown. It is
// safe for concurrent use.
type Backlog struct {
	mu     sync.Mutex
	router *sample
	agents map[string]sample
}

type sample struct {
	age time.Duration
	at  time.Time
}

var _ api.Backlog = (*Backlog)(nil)

// SetRouter sets the router's backlog age, sampled at at.
func (b *Backlog) SetRouter(age time.Duration, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.router = &sample{age, at}
}

// SetAgent sets agent's backlog age, sampled at at.
func (b *Backlog) SetAgent(agent string, age time.Duration, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.agents == nil {
		b.agents = map[string]sample{}
	}
	b.agents[agent] = sample{age, at}
}

// RouterBacklog implements api.Backlog.
func (b *Backlog) RouterBacklog() (time.Duration, time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.router == nil {
		return 0, time.Time{}, false
	}
	return b.router.age, b.router.at, true
}

// AgentBacklog implements api.Backlog.
func (b *Backlog) AgentBacklog(agent string) (time.Duration, time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.agents[agent]
	return s.age, s.at, ok
}
