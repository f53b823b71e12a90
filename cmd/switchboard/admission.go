package main

import (
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/lag"
)

// samplerBacklog is the lag sampler's last sample as the API's admission
// reads it (api.Backlog).
type samplerBacklog struct{ s *lag.Sampler }

var _ api.Backlog = samplerBacklog{}

func (b samplerBacklog) RouterBacklog() (time.Duration, time.Time, bool) {
	own, ok := b.s.Router()
	return ageOf(own, ok)
}

func (b samplerBacklog) AgentBacklog(agent string) (time.Duration, time.Time, bool) {
	a, ok := b.s.Agent(agent)
	return ageOf(a, ok)
}

// ageOf is a group's backlog age when the sample measured one: a group
// that is missing, failed or could not be read is unknown.
func ageOf(a lag.AgentLag, ok bool) (time.Duration, time.Time, bool) {
	if !ok || !a.HasLag() || !a.HasAge {
		return 0, time.Time{}, false
	}
	return a.OldestAge, a.SampledAt, true
}

// newAdmission builds the API's admission from http.admission (nil when it
// is off), reading the node's lag sampler, with its metric in reg.
func newAdmission(cfg *config.Config, s *lag.Sampler, reg prometheus.Registerer) (*api.Admission, error) {
	a := cfg.HTTP.Admission
	if !a.On() {
		return nil, nil
	}
	return api.NewAdmission(api.AdmissionConfig{
		BacklogFraction: a.BacklogFraction, Interval: cfg.Router.LagInterval.D(),
		RouterSlack: cfg.RouterCommitSlack(), AgentSlack: a.AgentCommitInterval.D(),
	}, samplerBacklog{s}, clockwork.NewRealClock(), reg)
}
