//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOneIntentIsOneTraceApacheKafka is the trace test on Apache Kafka:
// switchboard serve and switchboard agent (two processes' worth of
// components, each with its own tracer provider) export one intent's spans
// to one OTLP receiver, as one trace: intake → intent → dispatch → the
// agent's handling → answer → resolve.
func TestOneIntentIsOneTraceApacheKafka(t *testing.T) {
	bootstrap := apacheKafka(t)
	rcv, endpoint := newOTLPReceiver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := runPrefix("trace")
	httpAddr := freeLoopback(t)
	cfgFile := filepath.Join(t.TempDir(), "switchboard.yaml")
	cfg := fmt.Sprintf(`kafka:
  bootstrap_servers: %[2]q
  group_id: %[1]s.router
`+shortTopics+`  partitions: 3
  auto_create: true
agents:
  worker: {topic: %[1]s.agent.worker, group_id: %[1]s.workers}
intents:
  work: {agent: worker, timeout: 2m}
http: {listen: %[3]q, auth: {mode: off}}
log: {level: warn}
telemetry:
  traces: {endpoint: %[4]q, sample_ratio: 0}
  trace_url: "http://viewer.test/trace/{trace_id}"
`, p, bootstrap, httpAddr, endpoint)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var serveErr, agentErr syncBuffer
	served, agentDone := make(chan int, 1), make(chan int, 1)
	sctx, stopServe := context.WithCancel(ctx)
	actx, stopAgent := context.WithCancel(ctx)
	defer stopServe()
	defer stopAgent()
	go func() {
		served <- run(sctx, []string{"serve", "--insecure-no-auth", "--config", cfgFile}, &bytes.Buffer{}, &serveErr)
	}()
	go func() {
		agentDone <- run(actx, []string{"agent", "--name", "worker", "--config", cfgFile}, &bytes.Buffer{}, &agentErr)
	}()
	eventually(t, "serve to be ready", func() bool {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	// sample_ratio 0: only a caller's sampled trace is recorded, so the
	// trace below is the only one exported.
	const (
		callerTrace = "0af7651916cd43dd8448eb211c80319c"
		callerSpan  = "b7ad6b7169203331"
	)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+httpAddr+"/v1/intents?wait=90s",
		strings.NewReader(`{"intent_type":"work","payload":{"q":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Outcome  string `json:"outcome"`
		Timeline struct {
			TraceID string `json:"trace_id"`
		} `json:"timeline"`
	}
	err = json.NewDecoder(resp.Body).Decode(&res)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || res.Outcome != "answered" || res.Timeline.TraceID != callerTrace {
		t.Fatalf("POST ?wait: %d %+v %v", resp.StatusCode, res, err)
	}

	stopAgent()
	stopServe()
	if code := <-agentDone; code != 0 {
		t.Fatalf("agent exited %d: %s", code, agentErr.String())
	}
	if code := <-served; code != 0 {
		t.Fatalf("serve exited %d: %s", code, serveErr.String())
	}
	spans := rcv.trace(callerTrace)
	get := func(name string) receivedSpan {
		t.Helper()
		if len(spans[name]) != 1 {
			t.Fatalf("%d spans %s in the trace, want 1; the trace has: %v", len(spans[name]), name, names(spans))
		}
		return spans[name][0]
	}
	intake, intent := get("switchboard.intake"), get("switchboard.intent")
	dispatch, handle := get("switchboard.dispatch"), get("switchboard.agent.handle")
	answer, resolve := get("switchboard.answer"), get("switchboard.resolve")
	for _, link := range []struct{ child, parent receivedSpan }{
		{intent, intake}, {dispatch, intent}, {handle, dispatch}, {answer, handle}, {resolve, intent},
	} {
		if got, want := hex.EncodeToString(link.child.ParentSpanId), hex.EncodeToString(link.parent.SpanId); got != want {
			t.Errorf("%s's parent is %s, want %s (%s)", link.child.Name, got, want, link.parent.Name)
		}
	}
	if hex.EncodeToString(intake.ParentSpanId) != callerSpan {
		t.Errorf("the intake span does not continue the caller's span")
	}
	if handle.component != "agent" || intent.component != "serve" {
		t.Errorf("components: handle %q, intent %q; want agent and serve", handle.component, intent.component)
	}
	rcv.mu.Lock()
	total := len(rcv.spans)
	rcv.mu.Unlock()
	if n := len(names(spans)); total != n {
		t.Errorf("%d spans exported, %d of them in the caller's trace: at sample ratio 0 no other trace is recorded", total, n)
	}
}
