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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

func TestDevConfigIsTheShippedExample(t *testing.T) {
	shipped, err := os.ReadFile("../../deploy/examples/switchboard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(shipped, devConfig) {
		t.Fatal("cmd/switchboard/dev.yaml differs from deploy/examples/switchboard.yaml: copy one onto the other")
	}
}

func TestUsageAndErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("agents:\n  echo: {}\nintents:\n  echo: {agent: ecko}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args        []string
		code        int
		out, errOut string
	}{
		{[]string{}, 2, "", "Commands:"},
		{[]string{"help"}, 0, "switchboard dev", ""},
		{[]string{"bogus"}, 2, "", `unknown command "bogus"`},
		{[]string{"send", "--help"}, 0, "", "Usage: switchboard send"},
		{[]string{"send", "--help"}, 0, "", "Examples:"},
		{[]string{"send"}, 2, "", "--type is required"},
		{[]string{"send", "--type", "Bad Type"}, 1, "", "intent_type"},
		{[]string{"serve"}, 2, "", "--config"},
		{[]string{"serve", "--config", bad}, 1, "", bad + `:4: intents.echo.agent: unknown agent "ecko"`},
		{[]string{"serve", "--config", filepath.Join(dir, "missing.yaml")}, 1, "", "no such file"},
		{[]string{"tail", "--nope"}, 2, "", "flag provided but not defined"},
		{[]string{"agent", "--name", "a", "--error-rate", "2"}, 1, "", "not between 0 and 1"},
		{[]string{"version"}, 0, "switchboard", ""},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), tc.args, &out, &errOut)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out.String(), errOut.String())
			}
			if !strings.Contains(out.String(), tc.out) || !strings.Contains(errOut.String(), tc.errOut) {
				t.Fatalf("stdout %q / stderr %q, want %q / %q", out.String(), errOut.String(), tc.out, tc.errOut)
			}
			if strings.Contains(errOut.String(), "goroutine ") {
				t.Fatalf("a stack trace reached the user: %s", errOut.String())
			}
		})
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// eventually waits for cond, checking every 20ms, for up to 30s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventuallyWithin(t, 30*time.Second, what, cond)
}

// eventuallyWithin is eventually with its own deadline, for a condition
// that takes a known while to come about.
func eventuallyWithin(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestDevEndToEnd is the walkthrough, in process: switchboard dev,
// then send, the fallbacks, and a WebSocket client.
func TestDevEndToEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var banner, devErr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"dev", "--kafka-port", "0", "--registry", "127.0.0.1:0", "--http", "127.0.0.1:0"}, &banner, &devErr)
	}()
	eventually(t, "the dev banner", func() bool { return strings.Contains(banner.String(), "Stop with Ctrl-C") })
	flags := regexp.MustCompile(`--brokers (\S+) --registry (\S+)`).FindStringSubmatch(banner.String())
	httpAddr := regexp.MustCompile(`HTTP API\s+http://(\S+)`).FindStringSubmatch(banner.String())
	if flags == nil || httpAddr == nil {
		t.Fatalf("banner lacks addresses:\n%s", banner.String())
	}
	conn := []string{"--brokers", flags[1], "--registry", flags[2]}

	send := func(args ...string) map[string]any {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(ctx, append(append([]string{"send"}, args...), conn...), &out, &errOut); code != 0 {
			t.Fatalf("send %v: exit %d: %s", args, code, errOut.String())
		}
		var res map[string]any
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("send printed %q: %v", out.String(), err)
		}
		return res
	}

	if res := send("--type", "echo", "--payload", `{"q":1}`, "--wait", "10s"); res["outcome"] != "answered" {
		t.Fatalf("echo: %v", res)
	}
	fraud := []string{"--type", "fraud_check", "--payload", `{"amount":1}`, "--context-ref", "user-1", "--wait", "10s"}
	if res := send(fraud...); res["outcome"] != "fallback_static" || fmt.Sprint(res["answer"]) != "map[decision:review]" {
		t.Fatalf("first fraud_check: %v", res)
	}
	// The slow agent answers a second later; its late answer fills the cache.
	eventually(t, "the late answer", func() bool {
		resp, err := http.Get("http://" + httpAddr[1] + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `switchboard_responses_late_total{intent_type="fraud_check"} 1`)
	})
	res := send(fraud...)
	if res["outcome"] != "fallback_cache" {
		t.Fatalf("second fraud_check: %v", res)
	}
	if a, _ := res["answer"].(map[string]any); a["agent"] != "slow" {
		t.Fatalf("the cached answer is not the slow agent's: %v", res["answer"])
	}

	devContextWalkthrough(ctx, t, conn, httpAddr[1], send)
	devStreamingWalkthrough(ctx, t, conn, httpAddr[1])

	// A front end: POST without waiting, then subscribe over WebSocket.
	resp, err := http.Post("http://"+httpAddr[1]+"/v1/intents", "application/json", strings.NewReader(`{"intent_type":"echo","payload":{"ws":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	var posted struct {
		IntentID string `json:"intent_id"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&posted)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || posted.IntentID == "" {
		t.Fatalf("POST: %d %+v", resp.StatusCode, posted)
	}
	ws, _, err := websocket.DefaultDialer.DialContext(ctx, "ws://"+httpAddr[1]+"/v1/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ws.Close() }()
	if err := ws.WriteJSON(map[string]any{"subscribe": map[string]any{"intent_ids": []string{posted.IntentID}}}); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		var msg struct {
			Type   string         `json:"type"`
			Result map[string]any `json:"result"`
		}
		if err := ws.ReadJSON(&msg); err != nil {
			t.Fatalf("websocket: %v", err)
		}
		if msg.Type == "result" {
			if msg.Result["intent_id"] != posted.IntentID || msg.Result["outcome"] != "answered" {
				t.Fatalf("websocket result %v", msg.Result)
			}
			break
		}
	}
	_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"))
	_ = ws.Close()

	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("dev exited %d:\n%s", code, devErr.String())
	}
}
