package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP collector stub: it keeps every span posted
// to /v1/traces, with the switchboard.component of its resource.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []receivedSpan
}

type receivedSpan struct {
	*tracepb.Span
	component string
}

func newOTLPReceiver(t *testing.T) (*otlpReceiver, string) {
	t.Helper()
	rcv := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &req)
		}
		if r.URL.Path != "/v1/traces" || err != nil {
			t.Errorf("OTLP receiver: %s %s: %v", r.Method, r.URL.Path, err)
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		rcv.mu.Lock()
		for _, rs := range req.ResourceSpans {
			component := ""
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "switchboard.component" {
					component = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					rcv.spans = append(rcv.spans, receivedSpan{s, component})
				}
			}
		}
		rcv.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return rcv, srv.URL
}

// trace returns the spans received in trace traceID, by name.
func (r *otlpReceiver) trace(traceID string) map[string][]receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[string][]receivedSpan{}
	for _, s := range r.spans {
		if hex.EncodeToString(s.TraceId) == traceID {
			m[s.Name] = append(m[s.Name], s)
		}
	}
	return m
}

// TestOneIntentIsOneTrace is issue 20's trace test, in process: one intent
// through switchboard dev (the API, the router and the Go agent runner on
// the embedded broker) produces one trace whose spans cover intake →
// dispatch → the agent's handling → its answer → the result, exported to an
// OTLP receiver; the result names the trace and the API links it.
func TestOneIntentIsOneTrace(t *testing.T) {
	rcv, endpoint := newOTLPReceiver(t)
	cfgFile := filepath.Join(t.TempDir(), "switchboard.yaml")
	cfg := string(devConfig) + "\ntelemetry:\n  traces: {endpoint: \"" + endpoint + "\"}\n  trace_url: \"http://viewer.test/trace/{trace_id}\"\n"
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var banner, devErr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"dev", "--config", cfgFile, "--kafka-port", "0", "--registry", "", "--http", "127.0.0.1:0"}, &banner, &devErr)
	}()
	eventually(t, "the dev banner", func() bool { return strings.Contains(banner.String(), "Stop with Ctrl-C") })
	httpAddr := regexp.MustCompile(`HTTP API\s+http://(\S+)`).FindStringSubmatch(banner.String())
	if httpAddr == nil {
		t.Fatalf("banner lacks the API's address:\n%s", banner.String())
	}

	const (
		callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		callerSpan  = "00f067aa0ba902b7"
	)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+httpAddr[1]+"/v1/intents?wait=30s",
		strings.NewReader(`{"intent_type":"echo","payload":{"q":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		IntentID string `json:"intent_id"`
		Outcome  string `json:"outcome"`
		Timeline struct {
			TraceID string `json:"trace_id"`
		} `json:"timeline"`
	}
	err = json.NewDecoder(resp.Body).Decode(&res)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || res.Outcome != "answered" {
		t.Fatalf("POST ?wait: %d %+v %v", resp.StatusCode, res, err)
	}
	if res.Timeline.TraceID != callerTrace {
		t.Fatalf("the result's timeline names trace %q, want the caller's %s", res.Timeline.TraceID, callerTrace)
	}
	view, err := http.Get("http://" + httpAddr[1] + "/v1/intents/" + res.IntentID)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		TraceURL string `json:"trace_url"`
	}
	err = json.NewDecoder(view.Body).Decode(&v)
	_ = view.Body.Close()
	if err != nil || v.TraceURL != "http://viewer.test/trace/"+callerTrace {
		t.Fatalf("GET /v1/intents/%s: trace_url %q, %v", res.IntentID, v.TraceURL, err)
	}

	// Stopping flushes the spans still batched.
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("dev exited %d:\n%s", code, devErr.String())
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
	for _, link := range []struct {
		child, parent receivedSpan
		parentID      string
	}{
		{intake, receivedSpan{}, callerSpan},
		{intent, intake, ""},
		{dispatch, intent, ""},
		{handle, dispatch, ""},
		{answer, handle, ""},
		{resolve, intent, ""},
	} {
		want := link.parentID
		if link.parent.Span != nil {
			want = hex.EncodeToString(link.parent.SpanId)
		}
		if got := hex.EncodeToString(link.child.ParentSpanId); got != want {
			t.Errorf("%s's parent is %s, want %s", link.child.Name, got, want)
		}
	}
	if handle.component != "serve" || intake.component != "serve" {
		t.Errorf("components: handle %q, intake %q", handle.component, intake.component)
	}
	if intent.EndTimeUnixNano < answer.EndTimeUnixNano || dispatch.StartTimeUnixNano < intent.StartTimeUnixNano {
		t.Errorf("the intent span does not cover its dispatch and answer")
	}
}

func names(m map[string][]receivedSpan) []string {
	var out []string
	for n, s := range m {
		for range s {
			out = append(out, n)
		}
	}
	return out
}
