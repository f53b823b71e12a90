package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-mcp/switchboard/api"
)

const reloadBase = `agents:
  echo: {}
intents:
  echo:
    agent: echo
    timeout: 2s
router:
  delivery: exactly_once
`

// A file that does not load and one that changes a restart-only key are
// refused before anything is applied: the report names the key, the
// configuration in force stays, and the counters say so.
func TestReloaderRefusesBeforeApplying(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sb.yaml")
	write := func(y string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(reloadBase)
	cfg, hash, err := loadConfig(path, "i-1")
	if err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	n := &node{cfg: cfg, log: slog.New(slog.NewTextHandler(&logged, nil))}
	n.live.Store(cfg)
	reg := prometheus.NewRegistry()
	rl, err := newReloader(path, "i-1", hash, n, reg)
	if err != nil {
		t.Fatal(err)
	}

	write(strings.Replace(reloadBase, "    timeout: 2s", "    timeot: 5s", 1))
	rep := rl.reload(context.Background())
	if rep.Result != api.ReloadInvalid || rep.Hash != hash || rep.Error == nil || rep.Error.Field != "intents.echo.timeot" ||
		!strings.Contains(rep.Error.Message, "sb.yaml:6: intents.echo.timeot") {
		t.Fatalf("typo: %+v %+v", rep, rep.Error)
	}
	if !strings.Contains(logged.String(), "sb.yaml:6: intents.echo.timeot") {
		t.Fatalf("the log does not name file:line: key: %s", logged.String())
	}

	write(strings.Replace(reloadBase, "exactly_once", "at_least_once", 1) + "  tick: 10ms\n")
	rep = rl.reload(context.Background())
	if rep.Result != api.ReloadRefused || !slices.Equal(rep.Keys, []string{"router.delivery", "router.tick"}) || rep.Error.Field != "router.delivery" {
		t.Fatalf("restart-only keys: %+v", rep)
	}
	if !strings.Contains(logged.String(), "keys=\"router.delivery, router.tick\"") {
		t.Fatalf("the log does not name the keys: %s", logged.String())
	}
	if n.current() != cfg {
		t.Fatal("a refused reload replaced the configuration in force")
	}
	for result, want := range map[string]float64{api.ReloadInvalid: 1, api.ReloadRefused: 1, api.ReloadApplied: 0} {
		if got := testutil.ToFloat64(rl.reloads.WithLabelValues(result)); got != want {
			t.Errorf("reloads{result=%q} = %v, want %v", result, got, want)
		}
	}
	if got := testutil.ToFloat64(rl.info.WithLabelValues(hash)); got != 1 {
		t.Errorf("config_info{hash=%q} = %v", hash, got)
	}
}
