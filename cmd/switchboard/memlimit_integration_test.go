//go:build integration && linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const memoryServeConfig = `kafka:
  bootstrap_servers: %[2]s
  group_id: %[1]s.router
` + shortTopics + `  partitions: 3
  auto_create: true
agents:
  echo: {topic: %[1]s.agent.echo, encoding: json}
intents:
  echo: {agent: echo, timeout: 30s}
router:
  memory_limit_bytes: 312475648
http:
  listen: 127.0.0.1:0
  auth: {mode: "off"}
%[3]s`

// TestServeFitsItsBudgetsInsideTheProcessBudgetOnKafka runs 'switchboard
// serve' with router.memory_limit_bytes (298 MiB) on the real broker: the
// byte budgets the file leaves unset are derived to fit and logged; answers
// of 600 KB, more of them than the derived result store (18.6 MiB) holds,
// all come back, and the oldest, evicted from the store, is still answered
// (from the lookup store, fed by the reader whose prefetch the budget
// bounds). A file whose explicit result store cannot fit is refused at
// start, naming the file, line and key.
func TestServeFitsItsBudgetsInsideTheProcessBudgetOnKafka(t *testing.T) {
	bootstrap := apacheKafka(t)
	prefix := "mem." + randomHex(4)
	dir := t.TempDir()
	refused := filepath.Join(dir, "refused.yaml")
	if err := os.WriteFile(refused, fmt.Appendf(nil, memoryServeConfig, prefix+"x", bootstrap, "  results_max_bytes: 201326592\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	if code := run(context.Background(), []string{"serve", "--config", refused, "--insecure-no-auth"}, io.Discard, &out); code == 0 ||
		!strings.Contains(out.String(), "refused.yaml:25: http.results_max_bytes: does not fit router.memory_limit_bytes (312475648 bytes)") {
		t.Fatalf("a result store that cannot fit: exit %d, %s", code, out.String())
	}

	path := filepath.Join(dir, "switchboard.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, memoryServeConfig, prefix, bootstrap, ""), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	addr, serveLog := serveWithAgent(ctx, t, path, bootstrap, "echo", "--insecure-no-auth")
	for _, want := range []string{
		"derived_from_budget=http.lookup.cache_mb,http.results_max_bytes,http.websocket.send_queue_bytes,http.max_waiting_bytes,http.max_reading_bytes,router.max_pending_bytes",
		"results_mib=18 ", "poll_queue_mib=9 ", "feed_prefetch_mib=9 ", "process_budget_mib=298 ", "resident_set_check=true",
	} {
		if !strings.Contains(serveLog.String(), want) {
			t.Fatalf("serve's log lacks %q:\n%s", want, serveLog.String())
		}
	}
	base := "http://" + addr
	do := func(method, path, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	blob := strings.Repeat("x", 600_000)
	const n = 40 // 24 MB of answers, held twice (answer and JSON): past the 18.6 MiB store
	for i := range n {
		id := fmt.Sprintf("%s-%02d", prefix, i)
		code, body := do("POST", "/v1/intents?wait=60s", fmt.Sprintf(`{"intent_id":%q,"intent_type":"echo","payload":{"blob":%q}}`, id, blob))
		var res struct{ Outcome string }
		if code != 200 || json.Unmarshal(body, &res) != nil || res.Outcome != "answered" {
			t.Fatalf("intent %d: %d %.200s", i, code, body)
		}
	}
	code, body := do("GET", fmt.Sprintf("/v1/intents/%s-00", prefix), "")
	if code != 200 || !strings.Contains(string(body), `"answered"`) || !strings.Contains(string(body), blob[:1000]) {
		t.Fatalf("the first answer, evicted from the store: %d %.200s", code, body)
	}
}
