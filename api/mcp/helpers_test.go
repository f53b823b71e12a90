package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/apitest"
	"github.com/switchboard-mcp/switchboard/api/mcp"
	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/intents/payload"
	"github.com/switchboard-mcp/switchboard/schemas"
)

const testTimeout = 10 * time.Second

// Keys of two tenants.
const (
	keyAcme  = "acme-key-0123456789abcdef"
	keyOther = "other-key-0123456789abcdef"
)

type harness struct {
	t       *testing.T
	clock   *clockwork.FakeClock
	pub     *apitest.Publisher
	results *api.Results
	ts      *httptest.Server
	ep      *mcp.Endpoint
	reg     *prometheus.Registry // the API's
	bg      sync.WaitGroup
}

type fakeProgress struct {
	mu   sync.Mutex
	subs map[string]func(mcp.Progress)
	subd chan string
}

func (f *fakeProgress) SubscribeProgress(tenant, id string, fn func(mcp.Progress)) func() {
	f.mu.Lock()
	f.subs[tenant+"/"+id] = fn
	f.mu.Unlock()
	f.subd <- id
	return func() {
		f.mu.Lock()
		delete(f.subs, tenant+"/"+id)
		f.mu.Unlock()
	}
}

func (f *fakeProgress) send(tenant, id string, p mcp.Progress) {
	f.mu.Lock()
	fn := f.subs[tenant+"/"+id]
	f.mu.Unlock()
	fn(p)
}

func catalog(t *testing.T) api.Catalog {
	t.Helper()
	in, err := payload.Compile([]byte(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
		"$defs":{"money":{"type":"number","minimum":0}},
		"properties":{"amount":{"$ref":"#/$defs/money"}},"required":["amount"],"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	ro := true
	return api.Catalog{IntentTypes: []api.IntentTypeInfo{
		{Name: "echo", Agent: "echo", TimeoutMs: 2000, Description: "Echoes.", Annotations: &api.ToolAnnotations{ReadOnly: &ro}},
		{Name: "fail", Agent: "echo", TimeoutMs: 2000, Description: "Fails."},
		{Name: "fraud_check", Agent: "slow", TimeoutMs: 300, Description: "Checks an amount.", InputSchema: in},
		{Name: "slow", Agent: "slow", TimeoutMs: 60000, Description: "Never answers by itself."},
	}}
}

// newHarness serves the API with the MCP endpoint. Its publisher answers
// like the demo agents would, through the results: echo answers, fail
// fails, fraud_check falls back; slow answers only a cancel.
func newHarness(t *testing.T, progress mcp.ProgressSource) *harness {
	t.Helper()
	return newHarnessWith(t, progress, nil)
}

// newHarnessWith is newHarness with the endpoint's config changed by edit.
func newHarnessWith(t *testing.T, progress mcp.ProgressSource, edit func(*mcp.Config)) *harness {
	t.Helper()
	h := &harness{t: t, clock: clockwork.NewFakeClock(), results: api.NewResults(100)}
	h.pub = &apitest.Publisher{
		Func: func(_ context.Context, req *schemas.IntentRequest) error {
			res := apitest.Result(req, `{"agent":"echo","echo":`+string(req.Payload)+`}`)
			switch req.IntentType {
			case "fail":
				res.Outcome, res.Answer = schemas.OutcomeAgentError, nil
				res.Error = &schemas.ErrorInfo{Code: "agent_failed", Message: "echo: simulated failure"}
			case "fraud_check":
				res.Outcome, res.Answer = schemas.OutcomeFallbackStatic, schemas.Ptr(schemas.JSON(`{"decision":"review"}`))
			case "slow":
				return nil
			}
			h.bg.Add(1)
			go func() { defer h.bg.Done(); h.results.Add(res) }()
			return nil
		},
		CancelFunc: func(_ context.Context, c intents.Cancel) error {
			res := &schemas.IntentResult{
				IntentID: c.IntentID, IntentType: "slow", Outcome: schemas.OutcomeCancelled,
				Error: &schemas.ErrorInfo{Code: "cancelled", Message: c.Reason},
			}
			if c.Tenant != "" {
				res.Tenant = &c.Tenant
			}
			h.bg.Add(1)
			go func() { defer h.bg.Done(); h.results.Add(res) }()
			return nil
		},
	}
	cat := catalog(t)
	mcfg := mcp.Config{
		Catalog: cat, Publisher: h.pub, Results: h.results, Progress: progress, Clock: h.clock,
		Logger: slog.New(slog.DiscardHandler), MaxBodyBytes: 64 << 10,
	}
	if edit != nil {
		edit(&mcfg)
	}
	ep, err := mcp.New(mcfg)
	if err != nil {
		t.Fatal(err)
	}
	h.ep = ep
	reg := prometheus.NewRegistry()
	h.reg = reg
	cfg := api.Config{Listen: "127.0.0.1:0", Auth: api.AuthConfig{Required: true, APIKeys: []api.Key{
		{Name: "acme", Tenant: "acme", SHA256: sha256.Sum256([]byte(keyAcme))},
		{Name: "other", Tenant: "other", SHA256: sha256.Sum256([]byte(keyOther))},
	}}}
	srv, err := api.New(cfg, h.pub, h.results, api.WithClock(h.clock), api.WithLogger(slog.New(slog.DiscardHandler)),
		api.WithRegisterer(reg), api.WithGatherer(reg), api.WithCatalog(cat), api.WithMCP(ep))
	if err != nil {
		t.Fatal(err)
	}
	h.ts = httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		h.ts.CloseClientConnections()
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		_ = srv.Shutdown(ctx)
		h.ts.Close()
		h.bg.Wait()
	})
	return h
}

// keyed adds a credential to every request.
type keyed struct {
	key  string
	base http.RoundTripper
}

func (k keyed) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return k.base.RoundTrip(r)
}

func (h *harness) client(key string) *http.Client {
	return &http.Client{Transport: keyed{key: key, base: http.DefaultTransport}}
}

// rpc is one raw JSON-RPC exchange over HTTP.
type rpc struct {
	status  int
	header  http.Header
	body    string
	replies []map[string]any // JSON-RPC messages in the body (JSON or SSE)
}

// post sends body to /mcp with the given extra headers and key ("" for
// none).
func (h *harness) post(key string, hdr map[string]string, body string) rpc {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.ts.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := rpc{status: resp.StatusCode, header: resp.Header, body: string(b)}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && d != "" {
				var m map[string]any
				if json.Unmarshal([]byte(d), &m) == nil {
					out.replies = append(out.replies, m)
				}
			}
		}
	} else {
		var m map[string]any
		if json.Unmarshal(b, &m) == nil {
			out.replies = append(out.replies, m)
		}
	}
	return out
}

// reply returns the JSON-RPC response in r (the message with an id).
func (r rpc) reply() map[string]any {
	for _, m := range r.replies {
		if _, ok := m["id"]; ok {
			if _, isReq := m["method"]; !isReq {
				return m
			}
		}
	}
	return nil
}

// session opens a 2025-11-25 session for key and returns its id.
func (h *harness) session(key string) string {
	h.t.Helper()
	r := h.post(key, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := r.header.Get("Mcp-Session-Id")
	if r.status != http.StatusOK || sid == "" {
		h.t.Fatalf("initialize: %d %q %s", r.status, sid, r.body)
	}
	if r := h.post(key, map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.status/100 != 2 {
		h.t.Fatalf("initialized: %d %s", r.status, r.body)
	}
	return sid
}

func sessionHdr(sid string) map[string]string {
	return map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
}

// meta2026 is the _meta of a stateless 2026-07-28 request.
func meta2026(extensions string) string {
	return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{` + extensions + `},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`
}

// hdr2026 are the headers of a 2026-07-28 request (SEP-2243).
func hdr2026(method, name string) map[string]string {
	h := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method}
	if name != "" {
		h["Mcp-Name"] = name
	}
	return h
}
