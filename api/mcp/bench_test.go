package mcp_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/apitest"
	"github.com/switchboard-mcp/switchboard/api/mcp"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// BenchmarkDoorLatency measures what each door adds to an intent's round
// trip: tools/call on /mcp (2026-07-28, stateless, as raw JSON-RPC POSTs
// like any client's) against
// POST /v1/intents?wait, both over loopback HTTP to one server whose
// publisher answers at once through the results (no Kafka, no agent), at
// an open-loop 1,000 calls/s. It reports p50 and p99 per call; b.N calls
// per run (use -benchtime 5000x).
func BenchmarkDoorLatency(b *testing.B) {
	results := api.NewResults(100_000)
	pub := &apitest.Publisher{Func: func(_ context.Context, req *schemas.IntentRequest) error {
		go results.Add(apitest.Result(req, `{"ok":true}`))
		return nil
	}}
	cat := api.Catalog{IntentTypes: []api.IntentTypeInfo{{Name: "echo", Agent: "echo", TimeoutMs: 5000}}}
	ep, err := mcp.New(mcp.Config{Catalog: cat, Publisher: pub, Results: results, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv, err := api.New(api.Config{Listen: "127.0.0.1:0"}, pub, results, api.WithCatalog(cat), api.WithMCP(ep),
		api.WithLogger(slog.New(slog.DiscardHandler)), api.WithRegisterer(reg), api.WithGatherer(reg))
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

	b.Run("post_wait", func(b *testing.B) {
		paced(b, func(i int) error {
			body := fmt.Sprintf(`{"intent_type":"echo","payload":{"i":%d}}`, i)
			resp, err := hc.Post(ts.URL+"/v1/intents?wait=5s", "application/json", strings.NewReader(body))
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		})
	})
	b.Run("tools_call", func(b *testing.B) {
		paced(b, func(i int) error {
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"i":%d},`+
				`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, i, i)
			req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", "tools/call")
			req.Header.Set("Mcp-Name", "echo")
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"outcome":"answered"`) {
				return fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
			}
			return nil
		})
	})
}

// paced starts b.N calls at 1,000/s, each in its own goroutine (open
// loop: a slow call does not delay the next), and reports p50 and p99.
func paced(b *testing.B, call func(i int) error) {
	lat := make([]time.Duration, b.N)
	var wg sync.WaitGroup
	var failed sync.Once
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	b.ResetTimer()
	for i := range b.N {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			if err := call(i); err != nil {
				failed.Do(func() { b.Error(err) })
			}
			lat[i] = time.Since(t0)
		}()
	}
	wg.Wait()
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
