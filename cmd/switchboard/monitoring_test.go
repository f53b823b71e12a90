package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/switchboard-mcp/switchboard/router/kafkaio"
)

// The files the test holds to the code.
const (
	alertsFile    = "../../deploy/prometheus/alerts.yml"
	dashboardFile = "../../deploy/grafana/switchboard.json"
	runbookFile   = "../../docs/RUNBOOK.md"
	runbookURL    = "https://github.com/switchboard-mcp/switchboard/blob/main/docs/RUNBOOK.md"
)

// synthetic are the series Prometheus makes itself, and the labels it adds to
// every scraped series: queries may name them though /metrics does not.
var (
	synthetic      = map[string]bool{"up": true}
	scrapeLabels   = map[string]bool{"job": true, "instance": true}
	selectorRE     = regexp.MustCompile(`\b(switchboard_[a-zA-Z0-9_]+|up)\b\s*(\{[^}]*\})?`)
	matcherRE      = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	groupingRE     = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\(([^)]*)\)`)
	headingAnchors = regexp.MustCompile(`(?m)^#+\s+(.+)$`)
)

// TestAlertsAndDashboardMatchMetrics runs switchboard dev, drives traffic
// through it (answers, a timeout with its fallback and context lookup, a
// dead letter, a cancel, API requests), and checks that every metric the
// alert rules and the Grafana dashboard query is on its /metrics, with the
// labels the queries match and group by: neither can drift from the code.
// It also checks that every alert and dashboard link points at a section of
// docs/RUNBOOK.md.
func TestAlertsAndDashboardMatchMetrics(t *testing.T) {
	exprs := map[string][]string{} // file → PromQL expressions
	alerts := readAlerts(t)
	for _, a := range alerts {
		exprs["alerts.yml "+a.Alert] = []string{a.Expr}
	}
	for title, qs := range readDashboard(t) {
		exprs["switchboard.json "+title] = qs
	}
	if len(alerts) < 10 || len(exprs) < 30 {
		t.Fatalf("read %d alerts and %d queries in all: the files did not parse as expected", len(alerts), len(exprs))
	}
	checkRunbookLinks(t, alerts)

	series := scrapeDev(t)
	var problems []string
	for where, qs := range exprs {
		for _, q := range qs {
			problems = append(problems, checkQuery(where, q, series)...)
		}
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

// checkQuery reports the metrics q names that /metrics lacks, the labels its
// selectors match on that the metric does not have, and the labels it
// groups by that none of its metrics has.
func checkQuery(where, q string, series map[string]map[string]bool) []string {
	var problems []string
	q = strings.ReplaceAll(q, "$__rate_interval", "5m")
	used := map[string]bool{}
	for _, m := range selectorRE.FindAllStringSubmatch(q, -1) {
		name := m[1]
		if synthetic[name] {
			continue
		}
		labels, ok := series[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: %s is not on /metrics (query %q)", where, name, q))
			continue
		}
		used[name] = true
		for _, mm := range matcherRE.FindAllStringSubmatch(m[2], -1) {
			if l := mm[1]; !scrapeLabels[l] && !labels[l] {
				problems = append(problems, fmt.Sprintf("%s: %s has no label %q (query %q)", where, name, l, q))
			}
		}
	}
	for _, g := range groupingRE.FindAllStringSubmatch(q, -1) {
		for _, l := range strings.Split(g[1], ",") {
			l = strings.TrimSpace(l)
			if l == "" || scrapeLabels[l] || l == "le" {
				continue
			}
			found := false
			for name := range used {
				found = found || series[name][l]
			}
			if !found && len(used) > 0 {
				problems = append(problems, fmt.Sprintf("%s: no metric of the query has the label %q it groups by (query %q)", where, l, q))
			}
		}
	}
	return problems
}

type alertRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	Annotations map[string]string `yaml:"annotations"`
}

func readAlerts(t *testing.T) []alertRule {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	var out []alertRule
	for _, g := range doc.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// dashboardPanel is what the test reads of a Grafana panel.
type dashboardPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Links []struct {
		URL string `json:"url"`
	} `json:"links"`
	Panels []dashboardPanel `json:"panels"` // a collapsed row's
}

// readDashboard returns the PromQL of every panel, by title, and of the
// template variables (as "$name"); links go through checkRunbookLinks.
func readDashboard(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		UID        string           `json:"uid"`
		Panels     []dashboardPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	out := map[string][]string{}
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				if tg.Expr == "" {
					t.Errorf("%s: panel %q has a target without expr", dashboardFile, p.Title)
				}
				out[p.Title] = append(out[p.Title], tg.Expr)
			}
			for _, l := range p.Links {
				if !strings.HasPrefix(l.URL, runbookURL+"#") {
					t.Errorf("%s: panel %q links to %s, not a section of the runbook", dashboardFile, p.Title, l.URL)
				} else {
					checkAnchor(t, "switchboard.json "+p.Title, l.URL)
				}
			}
			walk(p.Panels)
		}
	}
	walk(doc.Panels)
	for _, v := range doc.Templating.List {
		if q, ok := v.Query.(string); ok && v.Type == "query" {
			out["$"+v.Name] = append(out["$"+v.Name], q)
		}
	}
	return out
}

// checkRunbookLinks: every alert has a runbook_url to a section of
// docs/RUNBOOK.md that exists.
func checkRunbookLinks(t *testing.T, alerts []alertRule) {
	t.Helper()
	for _, a := range alerts {
		u := a.Annotations["runbook_url"]
		if !strings.HasPrefix(u, runbookURL+"#") {
			t.Errorf("alert %s: runbook_url %q is not a section of %s", a.Alert, u, runbookURL)
			continue
		}
		checkAnchor(t, "alert "+a.Alert, u)
	}
}

var anchorsOnce struct {
	anchors map[string]bool
}

// checkAnchor reports a link whose #anchor is no heading of the runbook
// (GitHub's anchors: lower case, spaces to '-', punctuation dropped).
func checkAnchor(t *testing.T, where, u string) {
	t.Helper()
	if anchorsOnce.anchors == nil {
		b, err := os.ReadFile(runbookFile)
		if err != nil {
			t.Fatal(err)
		}
		anchorsOnce.anchors = map[string]bool{}
		for _, m := range headingAnchors.FindAllStringSubmatch(string(b), -1) {
			anchorsOnce.anchors[githubAnchor(m[1])] = true
		}
	}
	anchor := u[strings.Index(u, "#")+1:]
	if !anchorsOnce.anchors[anchor] {
		t.Errorf("%s: %s: docs/RUNBOOK.md has no heading for #%s", where, u, anchor)
	}
}

func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ' || r == '-':
			b.WriteRune('-')
		case r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// scrapeDev runs switchboard dev with the shipped example configuration
// (plus a breaker on "slow" and a 1s lag interval), drives traffic through
// it until the series the checks need exist, and returns its /metrics as
// metric name → label names seen on it.
func scrapeDev(t *testing.T) map[string]map[string]bool {
	t.Helper()
	example, err := os.ReadFile("../../deploy/examples/switchboard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	y := string(example)
	withBreaker := strings.Replace(y, "slow: {topic: mcp.agent.slow.request}", "slow: {topic: mcp.agent.slow.request, circuit_breaker: {consecutive_failures: 1000}}", 1)
	if withBreaker == y {
		t.Fatal("the example's slow agent changed: update the breaker this test adds")
	}
	cfgFile := filepath.Join(t.TempDir(), "switchboard.yaml")
	if err := os.WriteFile(cfgFile, []byte(withBreaker+"router:\n  lag_interval: 1s\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var banner, devErr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"dev", "--config", cfgFile, "--kafka-port", "0", "--registry", "127.0.0.1:0", "--http", "127.0.0.1:0"}, &banner, &devErr)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("dev exited %d:\n%s", code, devErr.String())
		}
	}()
	eventually(t, "the dev banner", func() bool { return strings.Contains(banner.String(), "Stop with Ctrl-C") })
	flags := regexp.MustCompile(`--brokers (\S+) --registry (\S+)`).FindStringSubmatch(banner.String())
	httpAddr := regexp.MustCompile(`HTTP API\s+http://(\S+)`).FindStringSubmatch(banner.String())
	if flags == nil || httpAddr == nil {
		t.Fatalf("banner lacks addresses:\n%s", banner.String())
	}
	api := "http://" + httpAddr[1]

	// An answer and a timeout with its fallback (fraud_check attaches
	// context), through the API so that its request metrics exist too.
	for _, body := range []string{`{"intent_type":"echo","payload":{"q":1}}`, `{"intent_type":"fraud_check","payload":{"amount":1},"context_ref":"user-1"}`} {
		resp, err := http.Post(api+"/v1/intents?wait=10s", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %d %s", body, resp.StatusCode, b)
		}
	}
	// A record the router cannot read: a dead letter.
	p, err := kafkaio.NewProducer(kafkaio.Settings{Bootstrap: flags[1]})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Send(ctx, "mcp.intent.request", []byte("bad-1"), []byte("not an intent"), nil, time.Now())
	p.Close(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// A cancel of an intent nobody knows (counted as ignored).
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"cancel", "no-such-intent", "--brokers", flags[1], "--registry", flags[2]}, &out, &errOut); code != 0 {
		t.Fatalf("cancel: exit %d: %s", code, errOut.String())
	}

	var series map[string]map[string]bool
	need := []string{
		"switchboard_records_dead_lettered_total", "switchboard_cancels_total", "switchboard_agent_lag_records",
		"switchboard_router_consumer_lag_records", "switchboard_context_lookups_total", "switchboard_transactions_total",
	}
	eventually(t, "the dead letter, the cancel, the lag samples and the consumer's statistics on /metrics", func() bool {
		series = metricLabels(t, api)
		return !slices.ContainsFunc(need, func(n string) bool { return series[n] == nil })
	})
	return series
}

// metricLabels reads /metrics as metric name (as exposed: a histogram's
// _bucket, _sum and _count apart) → the label names of its samples.
func metricLabels(t *testing.T, api string) map[string]map[string]bool {
	t.Helper()
	resp, err := http.Get(api + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := map[string]map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		if !strings.Contains(line, "{") {
			name, _, _ = strings.Cut(line, " ")
			rest = ""
		}
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		for _, m := range matcherRE.FindAllStringSubmatch(rest, -1) {
			out[name][m[1]] = true
		}
	}
	return out
}
