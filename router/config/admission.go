package config

import (
	"fmt"
	"strconv"
	"time"
)

// HTTPAdmission is http.admission: the API refuses a new intent before
// publishing it (HTTP 503 with Retry-After, an MCP tool error) when the
// backlog in front of it says it would most likely expire unread: the age
// of the oldest request no router has consumed plus the age of the oldest
// dispatch its agent has not consumed is at least BacklogFraction of the
// intent's effective timeout. Both ages come from the lag sampler
// (router.lag_interval); a sample older than three intervals is unknown,
// which admits.
type HTTPAdmission struct {
	// Enabled turns admission on. Default false: the ages are samples up
	// to router.lag_interval old, and with short timeouts a few hundred
	// milliseconds of backlog, normal under load, already refuse (CI met
	// it: an intent with a 200 ms timeout refused at a 261 ms backlog).
	Enabled *bool `yaml:"enabled"`
	// BacklogFraction is the share of the intent's timeout the two waits
	// may take, in (0, 1]. Default 0.8: an intent that reaches its agent
	// with less than a fifth of its timeout left is answered late or by a
	// fallback on a loaded host, and the ages are lower bounds while a
	// backlog grows (they are up to one lag_interval old).
	BacklogFraction float64 `yaml:"backlog_fraction"`
	// AgentCommitInterval is how far an agent's committed offsets trail
	// what it has read while it keeps up, subtracted from its backlog age
	// (switchboard agent commits every second, and an intent it is still
	// working on holds its offset). Default 1s.
	AgentCommitInterval Duration `yaml:"agent_commit_interval"`
}

// Defaults of http.admission.
const (
	DefaultAdmissionFraction       = 0.8
	DefaultAgentCommitInterval     = time.Second
	librdkafkaAutoCommitIntervalMs = 5000
)

// On reports whether admission is enabled.
func (a HTTPAdmission) On() bool { return a.Enabled != nil && *a.Enabled }

func (c *Config) setAdmissionDefaults() {
	a := &c.HTTP.Admission
	if a.BacklogFraction == 0 {
		a.BacklogFraction = DefaultAdmissionFraction
	}
	if a.AgentCommitInterval == 0 {
		a.AgentCommitInterval = Duration(DefaultAgentCommitInterval)
	}
}

func (c *Config) validateAdmission(add func(string, ...string)) {
	if f := c.HTTP.Admission.BacklogFraction; !(f > 0 && f <= 1) {
		add(fmt.Sprintf("%v is not a fraction in (0, 1]: 0.8 refuses an intent once the backlog takes 80%% of its timeout", f), "http", "admission", "backlog_fraction")
	}
}

// RouterCommitSlack is how far the router group's committed offsets trail
// what it has read while it keeps up: exactly_once commits with its
// transactions (at most router.commit_interval apart); at_least_once's
// client commits every auto.commit.interval.ms (kafka.properties,
// librdkafka's default 5 s). Admission subtracts it from the router's
// backlog age.
func (c *Config) RouterCommitSlack() time.Duration {
	if c.Router.Delivery == ExactlyOnce {
		return c.Router.CommitInterval.D()
	}
	ms := librdkafkaAutoCommitIntervalMs
	if v, err := strconv.Atoi(c.Kafka.Properties["auto.commit.interval.ms"]); err == nil && v >= 0 {
		ms = v
	}
	return time.Duration(ms) * time.Millisecond
}
