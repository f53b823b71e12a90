//go:build integration && linux

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

const authServeConfig = `kafka:
  bootstrap_servers: %[2]s
  group_id: %[1]s.router
` + shortTopics + `  partitions: 3
  auto_create: true
agents:
  echo: {topic: %[1]s.agent.echo, encoding: json}
intents:
  echo: {agent: echo, timeout: 30s}
http:
  listen: 127.0.0.1:0
  auth:
    api_keys:
      - {name: acme-web, tenant: acme, key_sha256: %[3]s}
      - {name: globex-web, tenant: globex, key_env: SWITCHBOARD_TEST_KEY_GLOBEX}
`

// TestServeAuthenticatesAndIsolatesTenantsOnKafka runs 'switchboard serve'
// with API keys against the real broker, and a demo agent: a tenant's intent
// goes round Kafka and comes back to that tenant only, over HTTP and the
// stream; a request without a credential is refused.
func TestServeAuthenticatesAndIsolatesTenantsOnKafka(t *testing.T) {
	bootstrap := apacheKafka(t)
	const keyAcme, keyGlobex = "sk_acme_integration_0123456789", "sk_globex_integration_0123456789"
	t.Setenv("SWITCHBOARD_TEST_KEY_GLOBEX", keyGlobex)
	sum := sha256.Sum256([]byte(keyAcme))
	prefix := "auth." + randomHex(4)
	path := filepath.Join(t.TempDir(), "switchboard.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, authServeConfig, prefix, bootstrap, hex.EncodeToString(sum[:])), 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	addr, _ := serveWithAgent(ctx, t, path, bootstrap, "echo")
	base := "http://" + addr

	do := func(method, path, key, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, body := do("POST", "/v1/intents", "", `{"intent_type":"echo","payload":{}}`); code != 401 || !strings.Contains(string(body), `"unauthenticated"`) {
		t.Fatalf("no credential: %d %s", code, body)
	}

	// Both tenants listen to every echo result; a browser-style credential
	// for globex.
	dial := func(hdr http.Header, protocols ...string) *websocket.Conn {
		t.Helper()
		d := websocket.Dialer{Subprotocols: protocols, HandshakeTimeout: 10 * time.Second}
		conn, resp, err := d.DialContext(ctx, "ws://"+addr+"/v1/stream", hdr)
		if err != nil {
			t.Fatalf("dial: %v %v", err, resp)
		}
		if err := conn.WriteJSON(map[string]any{"subscribe": map[string]any{"intent_type": "echo"}}); err != nil {
			t.Fatal(err)
		}
		var ack struct{ Type string }
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		if err := conn.ReadJSON(&ack); err != nil || ack.Type != "subscribed" {
			t.Fatalf("subscribe: %v %+v", err, ack)
		}
		return conn
	}
	acmeWS := dial(http.Header{"Authorization": {"Bearer " + keyAcme}})
	defer func() { _ = acmeWS.Close() }()
	globexWS := dial(nil, "switchboard.v1", "bearer."+keyGlobex)
	defer func() { _ = globexWS.Close() }()
	if globexWS.Subprotocol() != "switchboard.v1" {
		t.Fatalf("subprotocol %q", globexWS.Subprotocol())
	}

	code, body := do("POST", "/v1/intents?wait=60s", keyAcme, `{"intent_type":"echo","payload":{"from":"acme"}}`)
	if code != 200 {
		t.Fatalf("acme's intent: %d %s", code, body)
	}
	var res struct {
		IntentID string `json:"intent_id"`
		Outcome  string `json:"outcome"`
		Tenant   string `json:"tenant"`
	}
	if err := json.Unmarshal(body, &res); err != nil || res.Outcome != "answered" || res.Tenant != "acme" {
		t.Fatalf("acme's result: %s", body)
	}
	if code, body := do("GET", "/v1/intents/"+res.IntentID, keyGlobex, ""); code != 404 {
		t.Fatalf("globex reads acme's intent: %d %s", code, body)
	}
	if code, body := do("GET", "/v1/intents/"+res.IntentID, keyAcme, ""); code != 200 {
		t.Fatalf("acme reads its intent: %d %s", code, body)
	}

	// The stream: acme gets its result; globex gets its own next, never
	// acme's (the stream is ordered, so globex's first result tells).
	readResult := func(c *websocket.Conn) (id, tenant string) {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
		for {
			var msg struct {
				Type   string `json:"type"`
				Result struct {
					IntentID string `json:"intent_id"`
					Tenant   string `json:"tenant"`
				} `json:"result"`
			}
			if err := c.ReadJSON(&msg); err != nil {
				t.Fatalf("stream: %v", err)
			}
			if msg.Type == "result" {
				return msg.Result.IntentID, msg.Result.Tenant
			}
		}
	}
	if id, tenant := readResult(acmeWS); id != res.IntentID || tenant != "acme" {
		t.Fatalf("acme's stream got %s of %s", id, tenant)
	}
	code, body = do("POST", "/v1/intents?wait=60s", keyGlobex, `{"intent_type":"echo","payload":{"from":"globex"}}`)
	if code != 200 {
		t.Fatalf("globex's intent: %d %s", code, body)
	}
	if id, tenant := readResult(globexWS); tenant != "globex" || !strings.Contains(string(body), id) {
		t.Fatalf("globex's stream got %s of %s first, want its own %s", id, tenant, body)
	}
	t.Logf("acme's intent %s answered and streamed to acme only; globex's stream started with its own", res.IntentID)
}
