package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/router/config"
)

const devAgentsYAML = `schema_registry:
  url: http://registry.example:8081
agents:
  echo: {}
  slow: {}
  writer: {}
  mine: {demo: false, encoding: avro}
intents:
  echo: {agent: echo}
  mine: {agent: mine}
  slow: {agent: slow}
  write: {agent: writer}
`

// Issue 14: --agents names the demo agents to run; all (the default) means
// every agent without demo: false.
func TestDemoAgents(t *testing.T) {
	cfg, err := config.Parse("sb.yaml", []byte(devAgentsYAML), devLookupEnv(true))
	if err != nil {
		t.Fatalf("encoding: avro under dev, with dev's registry: %v", err)
	}
	for _, tc := range []struct{ flag, want string }{
		{"all", "echo,slow,writer"},
		{"true", "echo,slow,writer"},
		{"none", ""},
		{"false", ""},
		{"echo, slow,echo", "echo,slow"},
		{"mine", "mine"},
	} {
		got, err := demoAgents(cfg, tc.flag)
		if err != nil || strings.Join(got, ",") != tc.want {
			t.Fatalf("--agents %s: %v, %v; want %s", tc.flag, got, err, tc.want)
		}
	}
	if _, err := demoAgents(cfg, "echo,ecko"); err == nil || err.Error() != `--agents: "ecko" is not an agent of sb.yaml (agents are: echo, mine, slow, writer)` {
		t.Fatalf("unknown agent: %v", err)
	}
}

// Issue 14: the banner counted every configured agent as a demo agent; it
// names those running and those waiting for the user's agent.
func TestDemoBannerLines(t *testing.T) {
	cfg, err := config.Parse("sb.yaml", []byte(devAgentsYAML), devLookupEnv(true))
	if err != nil {
		t.Fatal(err)
	}
	got := demoLines(cfg, []string{"echo", "slow"})
	want := "  demo agents        2 of 4: echo, slow (slow answers after 1s)\n" +
		"  waiting for yours  mine (reads mcp.agent.mine.request), writer (reads mcp.agent.writer.request): no demo agent answers them; start your agent\n"
	if got != want {
		t.Fatalf("banner lines:\n%s\nwant:\n%s", got, want)
	}
	if got := demoLines(cfg, nil); !strings.HasPrefix(got, "  demo agents        none (of 4 configured)\n") {
		t.Fatalf("no demo agents: %s", got)
	}
	// Without a registry, avro is refused as before.
	noURL := strings.Replace(devAgentsYAML, "schema_registry:\n  url: http://registry.example:8081\n", "", 1)
	if _, err := config.Parse("sb.yaml", []byte(noURL), devLookupEnv(false)); err == nil || !strings.Contains(err.Error(), "agents.mine.encoding: avro needs schema_registry.url") {
		t.Fatalf("avro without a registry: %v", err)
	}
}

// Issue 14, end to end: a config with an avro agent and a registry URL
// starts under dev, the banner says the URL is ignored, and an agent with
// demo: false is not answered by a demo agent (its intent times out).
func TestDevLeavesDemoFalseAgentsToTheUser(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sb.yaml")
	yaml := strings.Replace(devAgentsYAML, "  echo: {}\n", "  echo: {demo: false}\n", 1)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var banner, devErr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"dev", "--config", path, "--kafka-port", "0", "--registry", "127.0.0.1:0", "--http", "127.0.0.1:0"}, &banner, &devErr)
	}()
	defer func() { cancel(); <-done }()
	defer func() {
		if t.Failed() {
			t.Logf("dev's stderr:\n%s", devErr.String())
		}
	}()
	eventually(t, "the dev banner", func() bool {
		return strings.Contains(banner.String(), "Stop with Ctrl-C") || strings.Contains(devErr.String(), "switchboard dev:")
	})
	b := banner.String()
	for _, want := range []string{
		"(dev's own; http://registry.example:8081, named by the config or SWITCHBOARD_SCHEMA_REGISTRY_URL, is ignored)",
		"demo agents        2 of 4: slow, writer (slow answers after 1s; writer streams)",
		"waiting for yours  echo (reads mcp.agent.echo.request), mine (reads mcp.agent.mine.request)",
	} {
		if !strings.Contains(b, want) {
			t.Fatalf("banner lacks %q:\n%s\nstderr:\n%s", want, b, devErr.String())
		}
	}
	flags := regexp.MustCompile(`--brokers (\S+) --registry (\S+)`).FindStringSubmatch(b)
	if flags == nil {
		t.Fatalf("banner lacks addresses:\n%s", b)
	}
	code, out, errOut := runCLI(t, "send", "--brokers", flags[1], "--registry", flags[2], "--type", "echo", "--timeout", "1s", "--wait", "30s")
	if code != 0 || !strings.Contains(out, `"outcome":"timed_out"`) {
		t.Fatalf("echo with demo: false: exit %d, %s%s", code, out, errOut)
	}
}

// With --registry ” dev has no registry, and an avro agent is refused even
// when the file names a registry (dev would not use it).
func TestDevWithoutRegistryRefusesAvro(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sb.yaml")
	if err := os.WriteFile(path, []byte(devAgentsYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "dev", "--config", path, "--kafka-port", "0", "--registry", "", "--http", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, "agents.mine.encoding: avro needs a schema registry, and --registry is empty") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
