package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// devStreamingWalkthrough is the streaming part of the dev walkthrough: the
// writer agent's progress through send --follow, then through one POST
// ?stream=sse, as curl -N shows it.
func devStreamingWalkthrough(ctx context.Context, t *testing.T, conn []string, httpAddr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	args := append([]string{"send", "--type", "write", "--payload", `{"text":"one two three","words":6,"delay_ms":0}`, "--follow", "--wait", "20s"}, conn...)
	if code := run(ctx, args, &out, &errOut); code != 0 {
		t.Fatalf("send --follow: exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 7 {
		t.Fatalf("send --follow printed %d lines, want 6 progress lines and the result:\n%s", len(lines), out.String())
	}
	for i, l := range lines[:6] {
		if want := "progress " + string(rune('1'+i)) + " "; !strings.HasPrefix(l, want) || !strings.Contains(l, `{"text":`) {
			t.Fatalf("line %d: %q", i+1, l)
		}
	}
	var res schemas.IntentResult
	if err := json.Unmarshal([]byte(lines[6]), &res); err != nil || res.Outcome != schemas.OutcomeAnswered || res.ProgressCount == nil || *res.ProgressCount != 6 {
		t.Fatalf("result line %q: %v", lines[6], err)
	}
	if !strings.Contains(string(*res.Answer), `"text":"one two three one two three"`) {
		t.Fatalf("answer %s", *res.Answer)
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+httpAddr+"/v1/intents?stream=sse",
		strings.NewReader(`{"intent_type":"write","payload":{"words":5,"delay_ms":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("POST ?stream=sse: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var events []string
	var text strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if ev, ok := strings.CutPrefix(line, "event: "); ok {
			events = append(events, ev)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok && events[len(events)-1] == "progress" {
			var p struct {
				Partial struct{ Text string } `json:"partial"`
			}
			_ = json.Unmarshal([]byte(data), &p)
			text.WriteString(p.Partial.Text)
		}
	}
	if got := strings.Join(events, ","); got != "accepted,progress,progress,progress,progress,progress,result" {
		t.Fatalf("events %s", got)
	}
	if !strings.HasPrefix(text.String(), "Switchboard routes each intent") {
		t.Fatalf("streamed text %q", text.String())
	}
}
