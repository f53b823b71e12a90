package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTopicsACLsPrints(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sb.yaml")
	if err := os.WriteFile(cfg, []byte("kafka: {group_id: g}\nagents: {echo: {}}\nintents: {echo: {agent: echo}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"topics", "acls", "--config", cfg, "--agent", "echo=User:agent-echo", "--api", "User:api"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{
		"PRINCIPAL", "User:agent-echo  Read   Topic     Literal  mcp.agent.echo.request", "User:agent-echo  Read   Group     Literal  switchboard-agent-echo",
		"User:agent-echo  Write  Topic     Literal  mcp.agent.response", "User:api         Write  Topic     Literal  mcp.intent.request",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "User:agent-echo  Write  Topic     Literal  mcp.intent.result") {
		t.Errorf("an agent got Write on results:\n%s", out.String())
	}

	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"topics", "acls", "--config", cfg}, 2, "name at least one principal"},
		{[]string{"topics", "acls", "--config", cfg, "--agent", "echo"}, 2, "want NAME=PRINCIPAL"},
		{[]string{"topics", "acls", "--config", cfg, "--api", "User:a", "--print", "--apply"}, 2, "choose one"},
		{[]string{"topics", "acls", "--config", cfg, "--agent", "nope=User:x"}, 1, `no agent "nope"`},
		{[]string{"topics", "acls", "--config", cfg, "--router", "router"}, 1, "want type:name"},
	} {
		out.Reset()
		errOut.Reset()
		if code := run(context.Background(), c.args, &out, &errOut); code != c.code || !strings.Contains(errOut.String(), c.err) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errOut.String(), c.code, c.err)
		}
	}
}
