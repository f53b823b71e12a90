package api_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/apitest"
)

// The admin listener serves /healthz, /readyz and /metrics while callers
// hold every connection the API's listener allows, and nothing else; a
// server without one listens once.
func TestAdminListenerAnswersProbesWhileTheAPIIsFull(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv, err := api.New(api.Config{Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", MaxHTTPConnections: 1}, &apitest.Publisher{}, api.NewResults(0),
		api.WithClock(clockwork.NewFakeClock()), api.WithLogger(discardLogger()), api.WithRegisterer(reg), api.WithGatherer(reg))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := startRun(ctx, t, srv)
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	if srv.AdminAddr() == "" || srv.AdminAddr() == srv.Addr() {
		t.Fatalf("admin address %q, API address %q: want an address of its own", srv.AdminAddr(), srv.Addr())
	}
	// A caller holds the API listener's only connection.
	holder, err := net.DialTimeout("tcp", srv.Addr(), testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Close() }()
	if _, err := io.WriteString(holder, "GET /healthz HTTP/1.1\r\nHost: switchboard\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = holder.SetReadDeadline(time.Now().Add(testTimeout))
	if _, err := holder.Read(make([]byte, 1)); err != nil {
		t.Fatalf("the holder's request was not answered: %v", err)
	}
	client := &http.Client{Timeout: testTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(addr, path string) (int, string, error) {
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	if code, _, err := get(srv.Addr(), "/healthz"); err == nil {
		t.Fatalf("the full API listener answered /healthz %d; want the connection closed", code)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		code, body, err := get(srv.AdminAddr(), path)
		if err != nil || code != http.StatusOK {
			t.Fatalf("admin %s while the API listener is full: %d %v", path, code, err)
		}
		if path == "/metrics" && !strings.Contains(body, `switchboard_api_admission_refused_total{reason="connections"} 1`) {
			t.Fatalf("admin /metrics does not count the API listener's refusal:\n%s", body)
		}
	}
	if code, _, err := get(srv.AdminAddr(), "/v1/intent-types"); err != nil || code != http.StatusNotFound {
		t.Fatalf("admin /v1/intent-types: %d %v; want 404 (probes and metrics only)", code, err)
	}
}

func TestAdminListenIsValidated(t *testing.T) {
	_, err := api.New(api.Config{Listen: "127.0.0.1:0", AdminListen: "9090"}, &apitest.Publisher{}, api.NewResults(0),
		api.WithClock(clockwork.NewFakeClock()), api.WithLogger(discardLogger()), api.WithRegisterer(prometheus.NewRegistry()))
	if err == nil || !strings.Contains(err.Error(), "AdminListen") {
		t.Fatalf("AdminListen \"9090\": %v; want an error naming AdminListen", err)
	}
}
