package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/apitest"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// lookupStub is an IntentLookup of two intents of tenant "acme".
type lookupStub struct{}

func (lookupStub) Lookup(_ context.Context, tenant, id string) (api.IntentStatus, error) {
	if tenant != "acme" {
		return api.IntentStatus{}, api.ErrIntentNotFound
	}
	switch id {
	case "done-1":
		return api.IntentStatus{IntentID: id, Tenant: tenant, Result: &schemas.IntentResult{
			IntentID: id, IntentType: "echo", Agent: "echo", Outcome: schemas.OutcomeAnswered, Tenant: schemas.Ptr("acme"),
			Answer: schemas.Ptr(schemas.JSON(`{"ok":true}`)), Attempts: 1,
			Timeline: schemas.Timeline{
				ReceivedAt: 1_700_000_000_000, DispatchedAt: schemas.Ptr(int64(1_700_000_000_001)),
				AnsweredAt: schemas.Ptr(int64(1_700_000_000_020)), ResolvedAt: 1_700_000_000_021, Deadline: 1_700_000_002_000,
			},
		}}, nil
	case "wait-1":
		return api.IntentStatus{IntentID: id, Tenant: tenant, Pending: &api.PendingState{
			State: api.PendingQueued, IntentType: "echo", Agent: "echo", ReceivedAt: 1_700_000_000_000, Deadline: 1_700_000_030_000,
		}}, nil
	}
	return api.IntentStatus{}, api.ErrIntentNotFound
}

func (lookupStub) Recent(context.Context, string, int, string) ([]api.IntentStatus, string, error) {
	return nil, "", nil
}

func TestLookupCommand(t *testing.T) {
	const key = "sk_lookup_cli_0123456789"
	reg := prometheus.NewRegistry()
	srv, err := api.New(api.Config{Listen: "127.0.0.1:0", Auth: api.AuthConfig{Required: true, APIKeys: []api.Key{{Name: "cli", Tenant: "acme", SHA256: sha256.Sum256([]byte(key))}}}},
		&apitest.Publisher{}, api.NewResults(10), api.WithLookup(lookupStub{}),
		api.WithRegisterer(reg), api.WithGatherer(reg), api.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer func() {
		_ = srv.Shutdown(context.Background())
		ts.Close()
	}()
	t.Setenv(envAPIKey, key)
	lookup := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"lookup", "--url", ts.URL}, args...), &out, &errOut)
		return code, out.String(), errOut.String()
	}

	code, out, _ := lookup("done-1")
	for _, want := range []string{
		"intent done-1: resolved, answered", `answer:   {"ok":true}`,
		"2023-11-14T22:13:20.000Z  received", "dispatched echo", "2023-11-14T22:13:20.021Z  resolved   answered",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("lookup done-1: exit %d, output lacks %q:\n%s", code, want, out)
		}
	}
	code, out, _ = lookup("wait-1")
	if code != 0 || !strings.Contains(out, "intent wait-1: pending, queued") || !strings.Contains(out, "deadline: 2023-11-14T22:13:50.000Z") {
		t.Fatalf("lookup wait-1: exit %d:\n%s", code, out)
	}
	if code, out, _ = lookup("--json", "wait-1"); code != 0 || !strings.HasPrefix(out, `{"intent_id":"wait-1","status":"pending","state":"queued"`) {
		t.Fatalf("lookup --json: exit %d: %s", code, out)
	}

	for _, c := range []struct {
		args []string
		key  string
		want string
	}{
		{[]string{"nope"}, key, `switchboard lookup: intent "nope" not found: unknown, another tenant's, or older than the results topic keeps`},
		{[]string{"done-1"}, "", "switchboard lookup: the API wants a credential: set $SWITCHBOARD_API_KEY or --api-key"},
		{[]string{"done-1"}, "sk_wrong_0123456789abcdef", "switchboard lookup: the credential was refused"},
		{[]string{"--url", "http://127.0.0.1:1", "done-1"}, key, "switchboard lookup: cannot reach http://127.0.0.1:1: "},
		{[]string{"has space"}, key, `switchboard lookup: "has space" is not an intent id`},
	} {
		t.Setenv(envAPIKey, c.key)
		code, _, errOut := lookup(c.args...)
		if code != 1 || !strings.HasPrefix(errOut, c.want) || strings.Count(errOut, "\n") != 1 {
			t.Fatalf("lookup %v: exit %d, stderr %q; want one line starting %q", c.args, code, errOut, c.want)
		}
	}
	var errOut bytes.Buffer
	if code := run(context.Background(), []string{"lookup"}, io.Discard, &errOut); code != 2 {
		t.Fatalf("lookup without an id: exit %d", code)
	}
}
