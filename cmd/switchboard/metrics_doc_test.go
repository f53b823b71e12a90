package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/switchboard-mcp/switchboard/router/config"
)

// metricsDocConfig builds a node without a broker: nothing listens on
// port 1, and at_least_once makes no transactional producer that would
// wait for one. Every part registers its metrics when it is built.
const metricsDocConfig = `
kafka: {bootstrap_servers: "127.0.0.1:1"}
router: {delivery: at_least_once}
agents: {echo: {circuit_breaker: {consecutive_failures: 5}}}
intents: {echo: {agent: echo}}
http: {listen: "127.0.0.1:0", auth: {mode: "off"}}
`

const metricPrefix = "switchboard_"

var (
	descRE        = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", .*constLabels: \{([^}]*)\}, variableLabels: \{([^}]*)\}\}$`)
	constLabelRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	codeSpanRE    = regexp.MustCompile("`([^`]+)`")
	metricTokenRE = regexp.MustCompile(`^([a-z][a-z0-9_]*)(?:\{([a-z_,]*)\})?$`)
)

// notMetrics are the words the Metrics section writes in backticks that are
// not metrics: the prefix, label values, a delivery guarantee, an isolation
// level.
var notMetrics = map[string]bool{
	"switchboard_":   true,                                         // the prefix
	"router_backlog": true, "agent_backlog": true, "waiting": true, // api_admission_refused_total's reasons
	"events": true, "bytes": true, // api_watch_overflows_total's bounds
	"exactly_once": true, "read_committed": true, // a delivery guarantee, an isolation level
}

// nodeMetrics builds a node as serve does, without a broker, and returns
// every metric its registries hold, by name, with its labels (Go's and the
// process's left out).
func nodeMetrics(t *testing.T) map[string][]string {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "switchboard.yaml")
	if err := os.WriteFile(file, []byte(metricsDocConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(file, []byte(metricsDocConfig), nil)
	if err != nil {
		t.Fatal(err)
	}
	apiCfg, err := apiConfig(cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	n, err := newNode(cfg, apiCfg, slog.New(slog.NewTextHandler(io.Discard, nil)), &configFile{path: file, instance: "docs", hash: "0123456789ab"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	defer func() {
		if err := n.run(ctx); err != nil {
			t.Errorf("closing the node: %v", err)
		}
	}()
	out := map[string][]string{}
	for _, r := range []*metricsRegistry{n.reg, n.routerReg.Load()} {
		ch := make(chan *prometheus.Desc)
		go func() { r.Describe(ch); close(ch) }()
		for d := range ch {
			m := descRE.FindStringSubmatch(d.String())
			if m == nil {
				t.Errorf("cannot read the metric of %s", d)
				continue
			}
			if strings.HasPrefix(m[1], "go_") || strings.HasPrefix(m[1], "process_") {
				continue
			}
			var labels []string
			for _, c := range constLabelRE.FindAllStringSubmatch(m[2], -1) {
				labels = append(labels, c[1])
			}
			if m[3] != "" {
				labels = append(labels, strings.Split(m[3], ",")...)
			}
			sort.Strings(labels)
			out[m[1]] = labels
		}
	}
	if len(out) < 50 {
		t.Fatalf("the node registered only %d metrics: did it build its parts?", len(out))
	}
	return out
}

// readmeSection returns the lines of README.md's section titled heading,
// up to the next section of its level, and the line the section starts on.
func readmeSection(t *testing.T, heading string) ([]string, int) {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	start := slices.Index(lines, heading)
	if start < 0 {
		t.Fatalf("README.md has no section %q", heading)
	}
	level := heading[:strings.Index(heading, " ")+1]
	end := len(lines)
	for i := start + 1; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], level) {
			end = i
			break
		}
	}
	return lines[start:end], start + 1
}

// mention is a metric as README.md writes it.
type mention struct {
	line   int
	labels []string // nil: written without labels
}

// TestREADMEMetricsAreTheNodes holds README.md's Metrics section to the
// metrics a node registers, both ways, with their labels, and the
// Prometheus rules, their tests and the Grafana dashboard to the same.
func TestREADMEMetricsAreTheNodes(t *testing.T) {
	registered := nodeMetrics(t)
	lines, first := readmeSection(t, "## Metrics")
	named := map[string][]mention{}
	for i, l := range lines {
		for _, span := range codeSpanRE.FindAllStringSubmatch(l, -1) {
			m := metricTokenRE.FindStringSubmatch(span[1])
			if m == nil || notMetrics[m[1]] {
				continue
			}
			name := metricPrefix + strings.TrimPrefix(m[1], metricPrefix)
			mn := mention{line: first + i}
			if len(span[1]) > len(m[1]) {
				mn.labels = strings.Split(m[2], ",")
				sort.Strings(mn.labels)
			}
			named[name] = append(named[name], mn)
		}
	}
	var problems []string
	for name, labels := range registered {
		ms, ok := named[name]
		short := strings.TrimPrefix(name, metricPrefix)
		if !ok {
			problems = append(problems, fmt.Sprintf("README.md: Metrics: %s is missing: add `%s` to the section", name, show(short, labels)))
			continue
		}
		written := false
		for _, m := range ms {
			switch {
			case m.labels == nil:
			case !slices.Equal(m.labels, labels):
				problems = append(problems, fmt.Sprintf("README.md:%d: Metrics: %s is written with labels {%s}: it has %s", m.line, name, strings.Join(m.labels, ","), show(short, labels)))
			default:
				written = true
			}
		}
		if len(labels) > 0 && !written {
			problems = append(problems, fmt.Sprintf("README.md:%d: Metrics: %s has labels: write it once as `%s`", ms[0].line, name, show(short, labels)))
		}
	}
	for name, ms := range named {
		if _, ok := registered[name]; !ok {
			problems = append(problems, fmt.Sprintf("README.md:%d: Metrics: %s is not a metric Switchboard registers: remove it or fix its name (or, if it is not a metric, add it to notMetrics in cmd/switchboard/metrics_doc_test.go)", ms[0].line, name))
		}
	}
	problems = append(problems, deployProblems(t, registered)...)
	problems = append(problems, proseProblems(t, registered)...)
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

// deployProblems names the metrics deploy/prometheus's rules and their
// tests and deploy/grafana's dashboard query that no node registers (a rule
// on such a metric never fires; its test would pass all the same).
func deployProblems(t *testing.T, registered map[string][]string) []string {
	t.Helper()
	exprs := map[string][]string{}
	for _, a := range readAlerts(t) {
		exprs[alertsFile+": alert "+a.Alert] = []string{a.Expr}
	}
	for title, qs := range readDashboard(t) {
		exprs[dashboardFile+": panel "+title] = qs
	}
	if dashboards, _ := filepath.Glob("../../deploy/grafana/*.json"); !slices.Equal(dashboards, []string{dashboardFile}) {
		t.Errorf("deploy/grafana holds %v: the test reads %s only; read the others too", dashboards, dashboardFile)
	}
	b, err := os.ReadFile(alertsTestFile)
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			InputSeries []struct {
				Series string `yaml:"series"`
			} `yaml:"input_series"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(b, &tests); err != nil {
		t.Fatalf("%s: %v", alertsTestFile, err)
	}
	for i, tc := range tests.Tests {
		for _, s := range tc.InputSeries {
			where := fmt.Sprintf("%s: test %d", alertsTestFile, i+1)
			exprs[where] = append(exprs[where], s.Series)
		}
	}
	var problems []string
	for where, qs := range exprs {
		for _, q := range qs {
			for _, m := range selectorRE.FindAllStringSubmatch(q, -1) {
				if synthetic[m[1]] {
					continue
				}
				if _, ok := registered[baseMetric(m[1], registered)]; !ok {
					problems = append(problems, fmt.Sprintf("%s: %s is not a metric Switchboard registers (%q)", strings.TrimPrefix(where, "../../"), m[1], q))
				}
			}
		}
	}
	return problems
}

const alertsTestFile = "../../deploy/prometheus/alerts_test.yml"

// baseMetric is the metric a series name belongs to: a histogram's
// _bucket, _sum and _count are its own.
func baseMetric(series string, registered map[string][]string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(series, suffix); ok {
			if _, known := registered[base]; known {
				return base
			}
		}
	}
	return series
}

func show(name string, labels []string) string {
	if len(labels) == 0 {
		return name
	}
	return name + "{" + strings.Join(labels, ",") + "}"
}

// packageMetrics are metrics the docs name that a node does not register:
// the contexts package's publisher and aggregator register them with the
// registerer a Go program gives them, and 'context aggregate
// --metrics-listen' its listener's refusals (metricsserve.go).
var packageMetrics = map[string]bool{
	"switchboard_metrics_connections_refused_total": true,
	"switchboard_context_publish_total":             true,
	"switchboard_context_publish_suppression_ratio": true,
	"switchboard_context_aggregate_events_total":    true,
	"switchboard_context_aggregate_lag_seconds":     true,
	"switchboard_context_aggregate_entities":        true,
}

var prefixedRE = regexp.MustCompile(`\bswitchboard_[a-z0-9_]*[a-z0-9]\b`)

// proseProblems names the switchboard_ metrics the docs' prose names that
// no node registers (the changelog is history, and is left alone).
func proseProblems(t *testing.T, registered map[string][]string) []string {
	t.Helper()
	var problems []string
	for _, f := range []string{"../../README.md", "../../docs/ARCHITECTURE.md", "../../docs/RUNBOOK.md", "../../deploy/README.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, name := range prefixedRE.FindAllString(line, -1) {
				if _, ok := registered[baseMetric(name, registered)]; !ok && !packageMetrics[name] {
					problems = append(problems, fmt.Sprintf("%s:%d: %s is not a metric Switchboard registers", strings.TrimPrefix(f, "../../"), i+1, name))
				}
			}
		}
	}
	return problems
}
