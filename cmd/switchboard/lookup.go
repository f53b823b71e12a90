package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/intents"
)

// Environment variables of 'switchboard lookup'.
const (
	envLookupURL = "SWITCHBOARD_URL"
	envAPIKey    = "SWITCHBOARD_API_KEY"
)

func runLookup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("lookup", "ID [flags]", `
Print an intent's result and timeline, or its pending state (agent,
deadline), as any Switchboard instance answers it: GET /v1/intents/ID of the
API at --url, the path the console's search takes. Every instance answers
for every intent the results topic still holds, whichever took it.

The credential is --api-key, else $`+envAPIKey+` (an API key or a JWT of
the tenant whose intent it is: another tenant's intent is not found).`, `  switchboard lookup 0193f1c2-7d4e-7a80-9c1b-2f5e8d3a6b01
  switchboard lookup --url https://switchboard.example.com --json "$ID" | jq .outcome
  switchboard lookup --wait 10s "$ID"`, stderr)
	base := fs.String("url", "", "the API's base `URL` (default: $"+envLookupURL+", else http://127.0.0.1:8080)")
	key := fs.String("api-key", "", "the `credential` to send (default: $"+envAPIKey+")")
	asJSON := fs.Bool("json", false, "print the API's JSON answer as it is")
	wait := fs.Duration("wait", 0, "wait up to this `duration` for a pending intent's result")
	id, err := parseWithArg(fs, args)
	if err != nil {
		return err
	}
	if id == "" {
		fmt.Fprintln(stderr, "the intent id is required")
		fs.Usage()
		return errUsage
	}
	if !intents.ValidID(id) {
		return fmt.Errorf("%q is not an intent id: ids are 1 to %d bytes of printable UTF-8 without spaces", id, intents.MaxIDLen)
	}
	if *base == "" {
		*base = os.Getenv(envLookupURL)
	}
	if *base == "" {
		*base = "http://127.0.0.1:8080"
	}
	if *key == "" {
		*key = os.Getenv(envAPIKey)
	}
	u := strings.TrimRight(*base, "/") + "/v1/intents/" + url.PathEscape(id)
	if *wait > 0 {
		u += "?wait=" + wait.String()
	}
	rctx, cancel := context.WithTimeout(ctx, *wait+30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("--url %q: %w", *base, err)
	}
	if *key != "" {
		req.Header.Set("Authorization", "Bearer "+*key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("cannot reach %s: %v", *base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("reading the answer of %s: %w", *base, err)
	}
	if resp.StatusCode != http.StatusOK {
		return lookupError(resp.StatusCode, body, id, *key != "")
	}
	if *asJSON {
		_, err := fmt.Fprintf(stdout, "%s\n", strings.TrimSpace(string(body)))
		return err
	}
	var v intentAnswer
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("%s answered what is not an intent: %w", *base, err)
	}
	v.print(stdout)
	return nil
}

// lookupError is the one line for an answer other than 200.
func lookupError(status int, body []byte, id string, withKey bool) error {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		msg = e.Error.Message
	}
	switch status {
	case http.StatusNotFound:
		return fmt.Errorf("intent %q not found: unknown, another tenant's, or older than the results topic keeps", id)
	case http.StatusUnauthorized:
		if !withKey {
			return fmt.Errorf("the API wants a credential: set $%s or --api-key (%s)", envAPIKey, msg)
		}
		return fmt.Errorf("the credential was refused: %s", msg)
	default:
		return fmt.Errorf("%d %s: %s", status, http.StatusText(status), msg)
	}
}

// intentAnswer is what GET /v1/intents/{id} answers, resolved or pending.
type intentAnswer struct {
	IntentID   string          `json:"intent_id"`
	Status     string          `json:"status"`
	IntentType string          `json:"intent_type"`
	Agent      string          `json:"agent"`
	Outcome    string          `json:"outcome"`
	Tenant     string          `json:"tenant"`
	Attempts   int             `json:"attempts"`
	Answer     json.RawMessage `json:"answer"`
	Error      *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	State    string `json:"state"`
	Deadline int64  `json:"deadline"`
	Timeline *struct {
		Deadline int64 `json:"deadline"`
	} `json:"timeline"`
	Events []struct {
		Event   string `json:"event"`
		At      int64  `json:"at"`
		Detail  string `json:"detail"`
		Outcome string `json:"outcome"`
	} `json:"events"`
}

func (v *intentAnswer) print(w io.Writer) {
	switch {
	case v.Status == "resolved":
		fmt.Fprintf(w, "intent %s: resolved, %s\n", v.IntentID, v.Outcome)
	case v.State != "":
		fmt.Fprintf(w, "intent %s: pending, %s\n", v.IntentID, v.State)
	default:
		fmt.Fprintf(w, "intent %s: %s\n", v.IntentID, v.Status)
	}
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(w, "  %-9s %s\n", name+":", value)
		}
	}
	field("type", v.IntentType)
	field("agent", v.Agent)
	field("tenant", v.Tenant)
	if v.Attempts > 0 {
		field("attempts", fmt.Sprint(v.Attempts))
	}
	deadline := v.Deadline
	if v.Timeline != nil {
		deadline = v.Timeline.Deadline
	}
	if deadline > 0 {
		field("deadline", msTime(deadline))
	}
	if len(v.Answer) > 0 {
		field("answer", string(v.Answer))
	}
	if v.Error != nil {
		field("error", v.Error.Code+": "+v.Error.Message)
	}
	if len(v.Events) > 0 {
		fmt.Fprintln(w, "timeline:")
	}
	for _, e := range v.Events {
		line := fmt.Sprintf("  %s  %-10s", msTime(e.At), e.Event)
		for _, s := range []string{e.Detail, e.Outcome} {
			if s != "" {
				line += " " + s
			}
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
}

func msTime(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }
