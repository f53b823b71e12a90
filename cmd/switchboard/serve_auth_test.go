package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/router/config"
)

// TestServeRefusesToRunWithoutAuthentication: serve needs a credential
// configured, and runs without one only when both the file (mode: off) and
// the command line (--insecure-no-auth) say so. All of this is decided
// before Kafka is contacted.
func TestServeRefusesToRunWithoutAuthentication(t *testing.T) {
	dir := t.TempDir()
	write := func(name, httpSection string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		y := "kafka: {bootstrap_servers: 127.0.0.1:1}\nagents: {echo: {}}\nintents: {echo: {agent: echo}}\n" + httpSection
		if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	off := write("off.yaml", "http:\n  auth:\n    mode: off\n")
	none := write("none.yaml", "")
	unset := write("unset.yaml", "http:\n  auth:\n    api_keys:\n      - {name: web, tenant: acme, key_env: SWITCHBOARD_TEST_KEY_NOT_SET}\n")

	cases := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"mode off without the flag", []string{"--config", off}, off + ":6: http.auth.mode: serve refuses to run without authentication"},
		{"flag without mode off", []string{"--config", none, "--insecure-no-auth"}, "--insecure-no-auth is given but http.auth.mode is not off"},
		{"nothing configured", []string{"--config", none}, none + ": http.auth: authentication is required but no credential is configured"},
		{"key env not set", []string{"--config", unset}, unset + ":7: http.auth.api_keys.0.key_env: environment variable SWITCHBOARD_TEST_KEY_NOT_SET is not set"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(context.Background(), append([]string{"serve"}, tc.args...), &out, &errOut); code != 1 {
				t.Fatalf("exit %d, want 1; stderr: %s", code, errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.want) {
				t.Fatalf("stderr %q\nwant it to contain %q", errOut.String(), tc.want)
			}
		})
	}

	// Both: no refusal, and the API runs without authentication.
	cfg, err := config.Load(off)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkServeAuth(cfg, true); err != nil {
		t.Fatalf("mode off with --insecure-no-auth: %v", err)
	}
	if c, err := apiConfig(cfg, true); err != nil || c.Auth.Required {
		t.Fatalf("mode off: %+v %v", c.Auth, err)
	}
}

func TestShippedConfigsServeWithAuthentication(t *testing.T) {
	cfg, err := config.Load("../../deploy/examples/switchboard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SWITCHBOARD_API_KEY", strings.Repeat("k", 32))
	c, err := apiConfig(cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Auth.Required || len(c.Auth.APIKeys) != 1 || c.Auth.APIKeys[0].Tenant != "demo" {
		t.Fatalf("auth = %+v", c.Auth)
	}
	// dev without --auth: none.
	if c, err := apiConfig(cfg, false); err != nil || c.Auth.Required {
		t.Fatalf("dev: %+v %v", c.Auth, err)
	}
}

func TestDevAuthFlagEnforcesTheConfigsAuth(t *testing.T) {
	t.Setenv("SWITCHBOARD_API_KEY", "") // unset: dev --auth needs it, plain dev does not
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"dev", "--auth", "--kafka-port", "0", "--registry", ""}, &out, &errOut)
	want := regexp.MustCompile(`built-in dev config:[0-9]+: http\.auth\.api_keys\.0\.key_env: environment variable SWITCHBOARD_API_KEY is not set`)
	if code != 1 || !want.MatchString(errOut.String()) {
		t.Fatalf("exit %d, stderr %s", code, errOut.String())
	}
}

// Every http.websocket limit reaches the API's configuration.
func TestWebSocketLimitsReachTheAPI(t *testing.T) {
	cfg, err := config.Parse("limits.yaml", []byte(`agents: {echo: {}}
intents: {echo: {agent: echo}}
http:
  websocket: {send_queue: 32, max_subscriptions: 7, message_rate: 2.5, message_burst: 4, max_connections_per_tenant: 9, max_replays: 3, max_replays_per_tenant: 1}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := apiConfig(cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	if c.SendQueue != 32 || c.MaxSubscriptions != 7 || c.MessageRate != 2.5 || c.MessageBurst != 4 ||
		c.MaxConnectionsPerTenant != 9 || c.MaxReplays != 3 || c.MaxReplaysPerTenant != 1 {
		t.Fatalf("api config %+v", c)
	}
}

// Every http request bound reaches the API's configuration.
func TestHTTPLimitsReachTheAPI(t *testing.T) {
	cfg, err := config.Parse("limits.yaml", []byte(`agents: {echo: {}}
intents: {echo: {agent: echo}}
http:
  max_body_bytes: 4096
  max_header_bytes: 8192
  read_header_timeout: 2s
  body_read_timeout: 3s
  idle_timeout: 4s
  results_max_bytes: 1048576
  websocket: {send_queue_bytes: 65536}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := apiConfig(cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxBodyBytes != 4096 || c.MaxHeaderBytes != 8192 || c.ReadHeaderTimeout != 2*time.Second ||
		c.BodyReadTimeout != 3*time.Second || c.IdleTimeout != 4*time.Second || c.SendQueueBytes != 65536 {
		t.Fatalf("api config %+v", c)
	}
	if cfg.HTTP.ResultsMaxBytes != 1<<20 {
		t.Fatalf("results_max_bytes = %d", cfg.HTTP.ResultsMaxBytes)
	}
}
