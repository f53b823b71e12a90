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
	"sync"
	"testing"
	"time"
)

// TestAdmissionApacheKafka is issue 16 item 4's admission on Apache Kafka:
// with the router stopped, the requests it has not consumed age; once
// their age takes the configured share of the intent's timeout, POST
// /v1/intents answers 503 overloaded (Retry-After, nothing published), and
// once a router is back and drains the backlog it admits again. The node
// runs in process, its parts started one by one so that the router can be
// stopped and replaced while the API, the results reader and the lag
// sampler keep running.
func TestAdmissionApacheKafka(t *testing.T) {
	bootstrap := apacheKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := runPrefix("adm")
	httpAddr := freeLoopback(t)
	cfgFile := filepath.Join(t.TempDir(), "switchboard.yaml")
	// The worker agent never runs: its group is missing, its backlog
	// unknown; the router's alone decides. 3 s × 0.8: refused from 2.4 s.
	yaml := fmt.Sprintf(`kafka:
  bootstrap_servers: %[2]q
  group_id: %[1]s.router
`+shortTopics+`  partitions: 2
  auto_create: true
agents:
  worker: {topic: %[1]s.agent.worker, group_id: %[1]s.workers}
intents:
  work: {agent: worker, timeout: 3s}
router: {lag_interval: 1s, instance_id: adm-1}
http: {listen: %[3]q, auth: {mode: off}, admission: {enabled: true, backlog_fraction: 0.8}}
log: {level: warn}
`, p, bootstrap, httpAddr)
	var logs syncBuffer
	n := newNodeFromYAML(ctx, t, cfgFile, yaml, &logs, false)

	// Every part of n.run but the router, which the test starts and stops.
	pctx, pcancel := context.WithCancel(ctx)
	var parts sync.WaitGroup
	for _, f := range []func(context.Context) error{n.api.Run, n.feed.run, n.store.Run, n.lag.Run, n.hang.Run} {
		parts.Add(1)
		go func() {
			defer parts.Done()
			if err := f(pctx); err != nil && pctx.Err() == nil {
				t.Errorf("a part of the node stopped: %v", err)
			}
		}()
	}
	startRouter := func() (stop func()) {
		rctx, rcancel := context.WithCancel(pctx)
		done := make(chan error, 1)
		go func() { done <- n.runRouter(rctx) }()
		return func() {
			rcancel()
			if err := <-done; err != nil {
				t.Errorf("router: %v", err)
			}
		}
	}
	stopRouter := startRouter()
	defer func() {
		stopRouter()
		pcancel()
		parts.Wait()
		n.closeLag()
		n.pub.Close()
		_ = n.lookup.Close()
		n.dropLookup()
		if t.Failed() {
			t.Logf("node log:\n%s", logs.String())
		}
	}()

	base := "http://" + httpAddr
	submit := func(id string) (int, http.Header, []byte) {
		body := `{"intent_type":"work","payload":{}}`
		if id != "" {
			body = fmt.Sprintf(`{"intent_id":%q,"intent_type":"work","payload":{}}`, id)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/intents", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	eventually(t, "the node to be ready", func() bool { return n.ready() == nil })
	if code, _, b := submit(""); code != http.StatusAccepted {
		t.Fatalf("first intent: %d %s", code, b)
	}
	eventually(t, "the router's group to show a backlog age (it has committed offsets)", func() bool {
		own, _ := n.lag.Router()
		return own.HasLag() && own.HasAge
	})

	// The router stops: what is published now waits. Keep submitting until
	// the API refuses.
	stopRouter()
	stopRouter = func() {}
	var (
		code     int
		hdr      http.Header
		body     []byte
		admitted int
	)
	eventuallyWithin(t, time.Minute, "POST /v1/intents to refuse while the router is stopped", func() bool {
		code, hdr, body = submit(fmt.Sprintf("%s-refused-%d", p, admitted))
		switch code {
		case http.StatusAccepted:
			admitted++
		case http.StatusServiceUnavailable:
			return true
		default:
			t.Fatalf("POST /v1/intents: %d %s", code, body)
		}
		return false
	})
	refusedID := fmt.Sprintf("%s-refused-%d", p, admitted)
	var e struct {
		Error struct {
			Code, Message, Reason string
			BacklogMs             int64 `json:"backlog_ms"`
		}
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != "overloaded" || e.Error.Reason != "router_backlog" || e.Error.BacklogMs < 2400 {
		t.Fatalf("refusal: %s (%v)", body, err)
	}
	if hdr.Get("Retry-After") == "" {
		t.Error("a refusal without Retry-After")
	}
	m := scrape(t, httpAddr)
	if m["switchboard_router_backlog_seconds"] < 2.4 || m[`switchboard_api_admission_refused_total{reason="router_backlog"}`] < 1 {
		t.Errorf("metrics: backlog %vs, refused %v", m["switchboard_router_backlog_seconds"], m[`switchboard_api_admission_refused_total{reason="router_backlog"}`])
	}
	t.Logf("refused after %d admitted: %s", admitted, e.Error.Message)

	// A router is back: it drains the backlog (each intent times out, no
	// agent runs) and the API admits again.
	if err := n.newRouter(); err != nil {
		t.Fatal(err)
	}
	stopRouter = startRouter()
	eventuallyWithin(t, 90*time.Second, "POST /v1/intents to admit once the router has drained the backlog", func() bool {
		code, _, body = submit("")
		return code == http.StatusAccepted
	})
	// The refused intent was never published: no router resolves it, while
	// the last admitted one is.
	eventually(t, "the last admitted intent to resolve", func() bool {
		resp, err := http.Get(base + "/v1/intents/" + fmt.Sprintf("%s-refused-%d", p, admitted-1))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	resp, err := http.Get(base + "/v1/intents/" + refusedID)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("the refused intent %s: GET answered %d, want 404", refusedID, resp.StatusCode)
	}
}
