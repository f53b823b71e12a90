package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/router/config"
)

const reloadBase = `
kafka: {bootstrap_servers: "k:9092", properties: {linger.ms: "5"}}
topics: {partitions: 6}
router: {delivery: exactly_once, default_timeout: 30s}
agents:
  slow: {max_in_flight: 10, rate: 5}
  echo: {}
intents:
  fraud_check: {agent: slow, timeout: 300ms, fallback: {static: {decision: review}}}
  echo: {agent: echo}
http: {listen: ":8080"}
`

func TestRestartKeys(t *testing.T) {
	cases := []struct {
		name, from, to string
		want           []string
	}{
		{"same file", "", "", nil},
		{"intent timeout and fallback", "timeout: 300ms, fallback: {static: {decision: review}}", "timeout: 2s, fallback: {static: {decision: deny}}", nil},
		{"intent added", "  echo: {agent: echo}\n", "  echo: {agent: echo}\n  echo2: {agent: echo, timeout: 1s}\n", nil},
		{"admission and breaker", "slow: {max_in_flight: 10, rate: 5}", "slow: {max_in_flight: 3, rate: 50, queue_limit: 9, circuit_breaker: {consecutive_failures: 3}}", nil},
		{"overload", "slow: {max_in_flight: 10, rate: 5}", "slow: {max_in_flight: 10, rate: 5, overload: {shed_late: false, adaptive_in_flight: false, min_in_flight: 2}}", nil},
		{"default timeout", "default_timeout: 30s", "default_timeout: 5s", nil},
		{"delivery", "delivery: exactly_once", "delivery: at_least_once", []string{"router.delivery"}},
		{"kafka property", `linger.ms: "5"`, `linger.ms: "6"`, []string{"kafka.properties.linger.ms"}},
		{"partitions and listen", "partitions: 6}\n", "partitions: 12}\n", []string{"topics.partitions"}},
		{"listen", `listen: ":8080"`, `listen: ":8090"`, []string{"http.listen"}},
		{"agent topic", "echo: {}\nintents", "echo: {topic: other}\nintents", []string{"agents.echo.topic"}},
		{"agent added", "echo: {}\nintents", "echo: {}\n  third: {}\nintents", []string{"agents.third"}},
		{"two keys", "delivery: exactly_once, default_timeout: 30s", "delivery: at_least_once, default_timeout: 30s, tick: 10ms", []string{"router.delivery", "router.tick"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old, err := parse(t, reloadBase, nil)
			if err != nil {
				t.Fatal(err)
			}
			next, err := parse(t, replaceOnce(t, reloadBase, c.from, c.to), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := config.RestartKeys(old, next); !slices.Equal(got, c.want) {
				t.Fatalf("RestartKeys = %q, want %q", got, c.want)
			}
		})
	}
}

func replaceOnce(t *testing.T, s, from, to string) string {
	t.Helper()
	if from == "" {
		return s
	}
	i := strings.Index(s, from)
	if i < 0 {
		t.Fatalf("%q is not in the base file", from)
	}
	return s[:i] + to + s[i+len(from):]
}
