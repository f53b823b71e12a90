//go:build integration

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSlowBodiesApacheKafka is http.max_reading_bytes and
// http.max_connections through 'serve' with API keys on Apache Kafka and a
// demo agent: one tenant's slow senders fill its half of the bodies being
// read, its next request is refused at once without its body read, and
// another tenant's intent is still read, routed and answered; past
// http.max_connections a connection is closed at once, /healthz included,
// and one closed makes room.
func TestSlowBodiesApacheKafka(t *testing.T) {
	bootstrap := apacheKafka(t)
	const keyAcme, keyGlobex = "sk_acme_reading_0123456789", "sk_globex_reading_0123456789"
	t.Setenv("SWITCHBOARD_TEST_KEY_ACME", keyAcme)
	t.Setenv("SWITCHBOARD_TEST_KEY_GLOBEX", keyGlobex)
	p := runPrefix("reading")
	path := filepath.Join(t.TempDir(), "switchboard.yaml")
	yaml := fmt.Sprintf(`kafka:
  bootstrap_servers: %[2]q
  group_id: %[1]s.router
`+shortTopics+`  partitions: 2
  auto_create: true
agents:
  echo: {topic: %[1]s.agent.echo, encoding: json}
intents:
  echo: {agent: echo, timeout: 30s}
http:
  listen: 127.0.0.1:0
  max_reading_bytes: 2097152
  max_connections: 8
  auth:
    api_keys:
      - {name: acme, tenant: acme, key_env: SWITCHBOARD_TEST_KEY_ACME}
      - {name: globex, tenant: globex, key_env: SWITCHBOARD_TEST_KEY_GLOBEX}
`, p, bootstrap)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	addr, _ := serveWithAgent(ctx, t, path, bootstrap, "echo")

	// A slow sender: the headers and the start of a body of 512 KiB.
	var slow []net.Conn
	send := func(key string) (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(c, "POST /v1/intents HTTP/1.1\r\nHost: sb\r\nContent-Type: application/json\r\nAuthorization: Bearer %s\r\nContent-Length: 524288\r\n\r\n{\"intent_type\":", key)
		return c, bufio.NewReader(c)
	}
	for range 2 {
		c, _ := send(keyAcme)
		slow = append(slow, c)
	}
	eventually(t, "acme's two bodies being read", func() bool {
		return scrape(t, addr)["switchboard_api_reading_bytes"] == 2*524288
	})
	_, br := send(keyAcme)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("acme's third slow body: no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !resp.Close || resp.Header.Get("Retry-After") != "1" ||
		!strings.Contains(string(body), `"reason":"reading"`) || !strings.Contains(string(body), "http.max_reading_bytes_per_tenant") {
		t.Fatalf("acme's third slow body: %d (close %v) %s", resp.StatusCode, resp.Close, body)
	}

	// Globex's intent is read, routed through Kafka and answered meanwhile.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/intents?wait=30s",
		strings.NewReader(`{"intent_type":"echo","payload":{"n":1}}`))
	req.Header.Set("Authorization", "Bearer "+keyGlobex)
	req.Header.Set("Content-Type", "application/json")
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	gr, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	gb, _ := io.ReadAll(gr.Body)
	_ = gr.Body.Close()
	if gr.StatusCode != http.StatusOK || !strings.Contains(string(gb), `"outcome":"answered"`) {
		t.Fatalf("globex's intent beside acme's slow bodies: %d %s", gr.StatusCode, gb)
	}

	// http.max_connections: 8. Two slow senders hold two; six more idle
	// connections fill it, and the next is closed at once, unanswered.
	for range 6 {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		slow = append(slow, c)
		t.Cleanup(func() { _ = c.Close() })
	}
	eventually(t, "a connection past http.max_connections closed at once", func() bool {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			return false
		}
		defer func() { _ = c.Close() }()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = c.Read(make([]byte, 1))
		return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
	})
	for _, c := range slow {
		_ = c.Close()
	}
	eventually(t, "/healthz once connections closed", func() bool {
		r, err := hc.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		_ = r.Body.Close()
		return r.StatusCode == http.StatusOK
	})
	got := scrape(t, addr)
	if got[`switchboard_api_admission_refused_total{reason="reading"}`] != 1 || got[`switchboard_api_admission_refused_total{reason="connections"}`] < 1 ||
		got["switchboard_api_reading_bytes"] != 0 {
		t.Fatalf("reading refused %v, connections refused %v, reading bytes %v; want 1, at least 1, 0",
			got[`switchboard_api_admission_refused_total{reason="reading"}`], got[`switchboard_api_admission_refused_total{reason="connections"}`], got["switchboard_api_reading_bytes"])
	}
}
