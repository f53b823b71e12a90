package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/router/config"
)

func TestHTTPAdmissionDefaultsAndErrors(t *testing.T) {
	c, err := config.Parse("sb.yaml", []byte(routes), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := c.HTTP.Admission
	if a.On() || a.BacklogFraction != config.DefaultAdmissionFraction || a.AgentCommitInterval.D() != time.Second {
		t.Fatalf("defaults: %+v", a)
	}
	if got := c.RouterCommitSlack(); got != c.Router.CommitInterval.D() {
		t.Errorf("exactly_once slack %s, want commit_interval %s", got, c.Router.CommitInterval)
	}
	c, err = config.Parse("sb.yaml", []byte("http:\n  admission: {enabled: true, backlog_fraction: 0.5, agent_commit_interval: 200ms}\n"+routes), nil)
	if err != nil || !c.HTTP.Admission.On() || c.HTTP.Admission.BacklogFraction != 0.5 || c.HTTP.Admission.AgentCommitInterval.D() != 200*time.Millisecond {
		t.Fatalf("set: %+v %v", c.HTTP.Admission, err)
	}
	c, err = config.Parse("sb.yaml", []byte("router: {delivery: at_least_once}\n"+routes), nil)
	if err != nil || c.RouterCommitSlack() != 5*time.Second {
		t.Fatalf("at_least_once slack: %v %v", c.RouterCommitSlack(), err)
	}
	c, err = config.Parse("sb.yaml", []byte("router: {delivery: at_least_once}\nkafka: {properties: {auto.commit.interval.ms: \"250\"}}\n"+routes), nil)
	if err != nil || c.RouterCommitSlack() != 250*time.Millisecond {
		t.Fatalf("at_least_once slack with auto.commit.interval.ms: %v %v", c.RouterCommitSlack(), err)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"fraction above 1", "http:\n  admission:\n    backlog_fraction: 1.5\n", `sb.yaml:3: http.admission.backlog_fraction: 1.5 is not a fraction in (0, 1]`},
		{"negative fraction", "http:\n  admission:\n    backlog_fraction: -0.1\n", `sb.yaml:3: http.admission.backlog_fraction: -0.1 is not a fraction`},
		{"not a number", "http:\n  admission:\n    backlog_fraction: half\n", `sb.yaml:3`},
		{"negative interval", "http:\n  admission:\n    agent_commit_interval: -1s\n", `sb.yaml:3`},
		{"unknown key", "http:\n  admission:\n    fraction: 0.5\n", `sb.yaml:3: http.admission.fraction: unknown key "fraction"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("sb.yaml", []byte(tc.yaml+routes), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("error:\n%v\nwant:\n%s", err, tc.want)
			}
		})
	}
}
