package api_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/apitest"
)

func TestConfigValidate(t *testing.T) {
	if err := (api.Config{}).Validate(); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	for name, cfg := range map[string]api.Config{
		"Listen":         {Listen: "nowhere"},
		"MaxWait":        {MaxWait: -time.Second},
		"PingPeriod":     {PingPeriod: time.Minute, PongWait: time.Second},
		"MaxBodyBytes":   {MaxBodyBytes: -1},
		"SendQueue":      {SendQueue: -1},
		"AllowedOrigins": {AllowedOrigins: []string{"console.example.com"}},
	} {
		err := cfg.Validate()
		if !errors.Is(err, api.ErrInvalidConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: Validate = %v", name, err)
		}
	}
}

func TestNewRejectsMissingDependenciesAndDuplicateMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	pub, results := &apitest.Publisher{}, api.NewResults(0)
	if _, err := api.New(api.Config{}, nil, results, api.WithRegisterer(reg)); !errors.Is(err, api.ErrInvalidConfig) {
		t.Fatalf("nil publisher: %v", err)
	}
	if _, err := api.New(api.Config{}, pub, nil, api.WithRegisterer(reg)); !errors.Is(err, api.ErrInvalidConfig) {
		t.Fatalf("nil results: %v", err)
	}
	if _, err := api.New(api.Config{}, pub, results, api.WithRegisterer(reg), api.WithClock(nil)); !errors.Is(err, api.ErrInvalidConfig) {
		t.Fatalf("nil clock: %v", err)
	}
	if _, err := api.New(api.Config{MaxWait: -1}, pub, results, api.WithRegisterer(reg)); !errors.Is(err, api.ErrInvalidConfig) {
		t.Fatalf("bad config: %v", err)
	}
	if _, err := api.New(api.Config{}, pub, results, api.WithRegisterer(reg)); err != nil {
		t.Fatalf("first New: %v", err)
	}
	if _, err := api.New(api.Config{}, pub, results, api.WithRegisterer(reg)); err == nil {
		t.Fatal("second New on the same registry: no error")
	}
}

func newRunServer(t *testing.T, clock clockwork.Clock) *api.Server {
	t.Helper()
	srv, err := api.New(api.Config{Listen: "127.0.0.1:0"}, &apitest.Publisher{}, api.NewResults(0),
		api.WithClock(clock), api.WithLogger(discardLogger()), api.WithRegisterer(prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func startRun(ctx context.Context, t *testing.T, srv *api.Server) <-chan error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- srv.Run(ctx) }()
	select {
	case <-srv.Ready():
	case err := <-errc:
		t.Fatalf("Run: %v", err)
	case <-time.After(testTimeout):
		t.Fatal("Run never listened")
	}
	return errc
}

func getHealthz(t *testing.T, addr string) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz: %d %s", resp.StatusCode, b)
	}
}

func TestRunServesUntilTheContextEnds(t *testing.T) {
	srv := newRunServer(t, clockwork.NewFakeClock())
	if srv.Addr() != "" {
		t.Fatal("Addr before Run")
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := startRun(ctx, t, srv)
	if !strings.HasPrefix(srv.Addr(), "127.0.0.1:") || strings.HasSuffix(srv.Addr(), ":0") {
		t.Fatalf("Addr = %q", srv.Addr())
	}
	getHealthz(t, srv.Addr())
	if err := srv.Run(ctx); !errors.Is(err, api.ErrAlreadyRunning) {
		t.Fatalf("second Run = %v", err)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run = %v, want nil after a clean shutdown", err)
	}
	if err := srv.Run(context.Background()); !errors.Is(err, api.ErrServerClosed) {
		t.Fatalf("Run after shutdown = %v", err)
	}
}

func TestRunReturnsNilAfterShutdown(t *testing.T) {
	srv := newRunServer(t, clockwork.NewRealClock())
	errc := startRun(context.Background(), t, srv)
	getHealthz(t, srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Shutdown(ctx); err != nil { // idempotent
		t.Fatalf("second Shutdown: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Run = %v", err)
	}
}

func TestRunReportsListenErrors(t *testing.T) {
	srv, err := api.New(api.Config{Listen: "127.0.0.1:-1"}, &apitest.Publisher{}, api.NewResults(0),
		api.WithRegisterer(prometheus.NewRegistry()), api.WithLogger(discardLogger()))
	if err != nil {
		t.Skipf("config rejected up front: %v", err)
	}
	if err := srv.Run(context.Background()); err == nil {
		t.Fatal("Run on a bad address succeeded")
	}
}
