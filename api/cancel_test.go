package api_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/intents"
)

func TestCancelPublishesACancelAndAnswers202(t *testing.T) {
	for _, tc := range []struct {
		name, path, body, reason string
	}{
		{"no reason", "/v1/intents/i-1", "", ""},
		{"reason in the query", "/v1/intents/i-1?reason=user%20left", "", "user left"},
		{"reason in the body", "/v1/intents/i-1", `{"reason":"tab closed"}`, "tab closed"},
		{"the query wins", "/v1/intents/i-1?reason=q", `{"reason":"b"}`, "q"},
		{"escaped id", "/v1/intents/i%2F1", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			resp, body := h.do("DELETE", tc.path, tc.body)
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("status = %d, want 202: %s", resp.StatusCode, body)
			}
			id := "i-1"
			if strings.Contains(tc.path, "%2F") {
				id = "i/1"
			}
			if got := decode[acceptedBody](t, body); got.IntentID != id || got.Status != "cancel_requested" {
				t.Fatalf("body = %s", body)
			}
			cancels := h.pub.Cancels()
			if len(cancels) != 1 || cancels[0] != (intents.Cancel{IntentID: id, Reason: tc.reason}) {
				t.Fatalf("published %+v, want one cancel of %s with reason %q", cancels, id, tc.reason)
			}
			if len(h.pub.Requests()) != 0 {
				t.Fatal("a cancel published an intent request")
			}
		})
	}
}

func TestCancelOfAResolvedIntentIs409WithTheOutcome(t *testing.T) {
	h := newHarness(t)
	h.results.Add(result("done-1", "echo", ""))
	resp, body := h.do("DELETE", "/v1/intents/done-1", "")
	wantError(t, resp, body, http.StatusConflict, "already_resolved", "")
	type conflict struct {
		Error struct {
			Outcome string `json:"outcome"`
		} `json:"error"`
	}
	if e := decode[conflict](t, body); e.Error.Outcome != "answered" {
		t.Fatalf("outcome = %q, want answered: %s", e.Error.Outcome, body)
	}
	if n := len(h.pub.Cancels()); n != 0 {
		t.Fatalf("published %d cancels for a resolved intent", n)
	}
}

func TestCancelRejectsBadInput(t *testing.T) {
	long := strings.Repeat("x", 1025)
	for _, tc := range []struct {
		name, path, body string
		status           int
		code, field      string
	}{
		{"invalid id", "/v1/intents/" + strings.Repeat("a", 300), "", 400, "invalid_parameter", "id"},
		{"id with a control character", "/v1/intents/a%00b", "", 400, "invalid_parameter", "id"},
		{"body not JSON", "/v1/intents/i-1", "reason", 400, "invalid_json", ""},
		{"unknown field", "/v1/intents/i-1", `{"why":"x"}`, 400, "invalid_json", ""},
		{"two objects", "/v1/intents/i-1", `{} {}`, 400, "invalid_json", ""},
		{"reason too long", "/v1/intents/i-1?reason=" + long, "", 400, "invalid_parameter", "reason"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			resp, body := h.do("DELETE", tc.path, tc.body)
			wantError(t, resp, body, tc.status, tc.code, tc.field)
			if n := len(h.pub.Cancels()); n != 0 {
				t.Fatalf("published %d cancels", n)
			}
		})
	}
}

func TestCancelThatCannotBePublishedIs503(t *testing.T) {
	h := newHarness(t)
	h.pub.CancelFunc = func(context.Context, intents.Cancel) error { return errors.New("broker down") }
	resp, body := h.do("DELETE", "/v1/intents/i-1", "")
	wantError(t, resp, body, http.StatusServiceUnavailable, "unavailable", "")
}
