//go:build integration

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWaitLimitApacheKafka is http.max_waiting on Apache Kafka, through a
// whole node: with two callers of POST /v1/intents?wait waiting (no agent
// answers), a third is refused at once, 503 overloaded reason waiting with
// Retry-After 1, and its intent is never published, while a POST that does
// not wait is; a caller going away and a wait that ends each give their
// slot back.
func TestWaitLimitApacheKafka(t *testing.T) {
	bootstrap := apacheKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := runPrefix("wait")
	httpAddr := freeLoopback(t)
	cfgFile := filepath.Join(t.TempDir(), "switchboard.yaml")
	yaml := fmt.Sprintf(`kafka:
  bootstrap_servers: %[2]q
  group_id: %[1]s.router
`+shortTopics+`  partitions: 2
  auto_create: true
agents:
  worker: {topic: %[1]s.agent.worker, group_id: %[1]s.workers}
intents:
  work: {agent: worker, timeout: 30s}
router: {instance_id: wait-1}
http: {listen: %[3]q, auth: {mode: off}, max_waiting: 2}
log: {level: warn}
`, p, bootstrap, httpAddr)
	var logs syncBuffer
	n := newNodeFromYAML(ctx, t, cfgFile, yaml, &logs, false)
	nctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- n.run(nctx) }()
	defer func() {
		stop()
		if err := <-ran; err != nil {
			t.Errorf("node: %v", err)
		}
		if t.Failed() {
			t.Logf("node log:\n%s", logs.String())
		}
	}()

	base := "http://" + httpAddr
	type answer struct {
		code int
		hdr  http.Header
		body []byte
		err  error
	}
	post := func(ctx context.Context, query, id string) answer {
		body := fmt.Sprintf(`{"intent_id":%q,"intent_type":"work","payload":{}}`, id)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/intents"+query, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return answer{err: err}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{code: resp.StatusCode, hdr: resp.Header, body: b}
	}
	start := func(ctx context.Context, query, id string) <-chan answer {
		c := make(chan answer, 1)
		go func() { c <- post(ctx, query, id) }()
		return c
	}
	get := func(id string) int {
		resp, err := http.Get(base + "/v1/intents/" + id)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waiting := func(want float64) {
		t.Helper()
		eventually(t, fmt.Sprintf("%v callers waiting", want), func() bool {
			return scrape(t, httpAddr)["switchboard_api_waiting_callers"] == want
		})
	}
	eventually(t, "the node to be ready", func() bool { return n.ready() == nil })

	goneCtx, goAway := context.WithCancel(ctx)
	defer goAway()
	gone := start(goneCtx, "?wait=60s", p+"-w1")
	stays := start(ctx, "?wait=60s", p+"-w2")
	waiting(2)

	a := post(ctx, "?wait=60s", p+"-refused")
	var e struct {
		Error struct{ Code, Message, Reason string }
	}
	if err := json.Unmarshal(a.body, &e); err != nil || a.code != http.StatusServiceUnavailable || e.Error.Code != "overloaded" ||
		e.Error.Reason != "waiting" || a.hdr.Get("Retry-After") != "1" || !strings.Contains(e.Error.Message, "http.max_waiting") {
		t.Fatalf("the third caller: %d %v %s", a.code, a.hdr, a.body)
	}
	if m := scrape(t, httpAddr); m[`switchboard_api_admission_refused_total{reason="waiting"}`] != 1 {
		t.Errorf("refused{waiting} = %v, want 1", m[`switchboard_api_admission_refused_total{reason="waiting"}`])
	}
	if a := post(ctx, "", p+"-nowait"); a.code != http.StatusAccepted {
		t.Fatalf("a POST without ?wait: %d %s", a.code, a.body)
	}

	// The caller going away gives its slot back; so does a wait that ends.
	goAway()
	if a := <-gone; a.err == nil {
		t.Fatalf("the caller gone got %d", a.code)
	}
	waiting(1)
	if a := post(ctx, "?wait=1s", p+"-w3"); a.code != http.StatusAccepted || !strings.Contains(string(a.body), "pending") {
		t.Fatalf("a wait that ends: %d %s", a.code, a.body)
	}
	waiting(1)

	// The refused intent was never published: the router made the others
	// pending (the lookup store reads that from Kafka), never it.
	for _, id := range []string{p + "-w1", p + "-w2", p + "-nowait", p + "-w3"} {
		eventually(t, id+" known", func() bool { return get(id) == http.StatusOK })
	}
	if code := get(p + "-refused"); code != http.StatusNotFound {
		t.Errorf("the refused intent: GET answered %d, want 404", code)
	}
	stop()
	if a := <-stays; a.code != http.StatusAccepted {
		t.Errorf("the waiting caller at shutdown: %d %s", a.code, a.body)
	}
}
