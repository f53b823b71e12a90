package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// devContextWalkthrough is the context part of the dev walkthrough (issue 8's
// done-when): a context publish for user-1, then a fraud_check intent with
// context_ref user-1 whose agent receives the snapshot and whose result's
// timeline names it.
func devContextWalkthrough(ctx context.Context, t *testing.T, conn []string, httpAddr string, send func(args ...string) map[string]any) {
	t.Helper()
	// The thresholds are the dev config's.
	cfgFile := filepath.Join(t.TempDir(), "switchboard.yaml")
	if err := os.WriteFile(cfgFile, devConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	publish := func(features string) map[string]any {
		t.Helper()
		var out, errOut bytes.Buffer
		args := append([]string{"context", "publish", "--config", cfgFile, "--entity", "user-1", "--features", features}, conn...)
		if code := run(ctx, args, &out, &errOut); code != 0 {
			t.Fatalf("context publish: exit %d: %s", code, errOut.String())
		}
		var d map[string]any
		if err := json.Unmarshal(out.Bytes(), &d); err != nil {
			t.Fatalf("context publish printed %q: %v", out.String(), err)
		}
		return d
	}
	d := publish(`{"clicks_5m":3,"spend_1h":100}`)
	if d["published"] != true || d["reason"] != "first" {
		t.Fatalf("first publish: %v", d)
	}
	version := d["version"].(float64)
	// Within dev.yaml's 5% threshold on spend_1h: suppressed.
	if d := publish(`{"clicks_5m":3,"spend_1h":104}`); d["published"] != false || d["reason"] != "suppressed" || d["version"] != version {
		t.Fatalf("publish within the threshold: %v", d)
	}

	var held map[string]any
	eventually(t, "the router's store to hold user-1", func() bool {
		resp, err := http.Get("http://" + httpAddr + "/v1/contexts/user-1")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && json.Unmarshal(b, &held) == nil
	})
	if held["version"] != version || held["status"] != "fresh" {
		t.Fatalf("GET /v1/contexts/user-1: %v", held)
	}

	res := send("--type", "fraud_check", "--payload", `{"demo":{"delay_ms":0}}`, "--context-ref", "user-1", "--wait", "10s")
	if res["outcome"] != "answered" {
		t.Fatalf("fraud_check with context: %v", res)
	}
	answer, _ := res["answer"].(map[string]any)
	got, _ := answer["context"].(map[string]any)
	if answer["context_status"] != "fresh" || got["version"] != version || got["entity_id"] != "user-1" {
		t.Fatalf("the agent did not receive the snapshot: %v", answer)
	}
	if f, _ := got["features"].(map[string]any); f["clicks_5m"] != 3.0 || f["spend_1h"] != 100.0 {
		t.Fatalf("the agent received features %v", got["features"])
	}
	tl, _ := res["timeline"].(map[string]any)
	if tl["context_version"] != version || tl["context_ts"] != d["snapshot_ts"] {
		t.Fatalf("the result's timeline does not name the snapshot: %v (published %v)", tl, d)
	}
}

func TestContextUsageAndErrors(t *testing.T) {
	noAggregate := filepath.Join(t.TempDir(), "plain.yaml")
	if err := os.WriteFile(noAggregate, []byte("agents: {a: {}}\nintents: {a: {agent: a}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args   []string
		code   int
		errOut string
	}{
		{[]string{"context"}, 2, "publish"},
		{[]string{"context", "bogus"}, 2, `unknown context command "bogus"`},
		{[]string{"context", "publish", "--help"}, 0, "Usage: switchboard context publish"},
		{[]string{"context", "publish", "--entity", "e"}, 2, "--entity and --features are required"},
		{[]string{"context", "publish", "--entity", "e", "--features", "[1]"}, 1, "--features: \"[1]\" is not a JSON object"},
		{[]string{"context", "publish", "--entity", "e", "--features", `{"x":"high"}`}, 1, `feature "x" is "high", not a number`},
		{[]string{"context", "aggregate", "--help"}, 0, "Usage: switchboard context aggregate"},
		{[]string{"context", "aggregate"}, 2, "--config is required"},
		{[]string{"context", "aggregate", "--config", noAggregate}, 1, "contexts.aggregate: missing"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), tc.args, &out, &errOut)
			if code != tc.code || !strings.Contains(errOut.String(), tc.errOut) {
				t.Fatalf("exit %d (want %d), stderr %q, want it to contain %q", code, tc.code, errOut.String(), tc.errOut)
			}
		})
	}
}
