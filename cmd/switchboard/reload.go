package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/router/config"
)

// reloadTimeout bounds how long a reload waits for the router's event loop
// to apply it.
const reloadTimeout = 30 * time.Second

// reloader rereads serve's configuration file on SIGHUP or POST
// /v1/admin/reload, validates it as at start, and applies it, all or
// nothing: to the router (in its event loop, router.Reconfigure), then to
// the API's and the MCP endpoint's catalogs. A file that does not load, or
// that changes a key that needs a restart (config.RestartKeys), leaves the
// configuration in force as it was. One reload runs at a time.
type reloader struct {
	path     string
	instance string // --instance-id: it overrides every reread file too
	n        *node
	log      *slog.Logger

	mu   sync.Mutex
	hash string // of the configuration in force

	reloads *prometheus.CounterVec
	info    *prometheus.GaugeVec
}

// configHash is the first 12 hex digits of the SHA-256 of a configuration
// file's bytes: the hash label of switchboard_config_info.
func configHash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// loadConfig reads and validates a configuration file, with the
// environment's overrides and --instance-id, and hashes it.
func loadConfig(path, instance string) (*config.Config, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("config: %w", err)
	}
	cfg, err := config.Parse(path, data, os.LookupEnv)
	if err != nil {
		return nil, "", err
	}
	if instance != "" {
		cfg.Router.InstanceID = instance
	}
	return cfg, configHash(data), nil
}

func newReloader(path, instance, hash string, n *node, reg prometheus.Registerer) (*reloader, error) {
	rl := &reloader{
		path: path, instance: instance, n: n, log: n.log, hash: hash,
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_config_reloads_total",
			Help: "Configuration reloads (SIGHUP, POST /v1/admin/reload) by result: applied, refused (a key that needs a restart changed), invalid (the file does not load). The old configuration stays unless applied.",
		}, []string{"result"}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_config_info",
			Help: "1, labelled with the hash (SHA-256, first 12 hex digits) of the configuration file in force.",
		}, []string{"hash"}),
	}
	for _, c := range []prometheus.Collector{rl.reloads, rl.info} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, r := range []string{api.ReloadApplied, api.ReloadRefused, api.ReloadInvalid} {
		rl.reloads.WithLabelValues(r)
	}
	rl.info.WithLabelValues(hash).Set(1)
	return rl, nil
}

// run reloads on every SIGHUP until ctx ends.
func (rl *reloader) run(ctx context.Context) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			rl.reload(ctx)
		}
	}
}

// reload rereads and applies the file; its report is the admin endpoint's
// answer. Each outcome is logged on one line.
func (rl *reloader) reload(ctx context.Context) api.ReloadReport {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	start := time.Now()
	cfg, hash, err := loadConfig(rl.path, rl.instance)
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), "\n", "; ")
		rl.log.Error("configuration reload: the file is invalid; the configuration in force stays", "file", rl.path, "error", msg)
		rl.reloads.WithLabelValues(api.ReloadInvalid).Inc()
		return api.ReloadFailed(api.ReloadInvalid, rl.hash, nil, msg, firstKey(err))
	}
	if keys := config.RestartKeys(rl.n.current(), cfg); len(keys) > 0 {
		return rl.refuse(keys)
	}
	if err := rl.n.reconfigure(ctx, cfg); err != nil {
		// Not expected: the router was built with the keys RestartKeys
		// compared (router.ErrNeedsRestart), or it did not take the
		// configuration in time. Either way it runs the old one.
		rl.log.Error("configuration reload: the router did not take it; the configuration in force stays", "file", rl.path, "error", err)
		rl.reloads.WithLabelValues(api.ReloadRefused).Inc()
		return api.ReloadFailed(api.ReloadRefused, rl.hash, nil, "the router did not take the configuration: "+err.Error(), "")
	}
	if hash != rl.hash {
		rl.info.DeleteLabelValues(rl.hash)
		rl.info.WithLabelValues(hash).Set(1)
		rl.hash = hash
	}
	rl.reloads.WithLabelValues(api.ReloadApplied).Inc()
	rl.log.Info("configuration reloaded", "file", rl.path, "hash", hash, "intent_types", len(cfg.Intents), "took", time.Since(start).Round(time.Millisecond))
	return api.ReloadReport{Result: api.ReloadApplied, Hash: hash}
}

// refuse reports a reload that changes keys needing a restart.
func (rl *reloader) refuse(keys []string) api.ReloadReport {
	list := strings.Join(keys, ", ")
	rl.log.Warn("configuration reload refused: these keys need a restart; the configuration in force stays", "file", rl.path, "keys", list)
	rl.reloads.WithLabelValues(api.ReloadRefused).Inc()
	return api.ReloadFailed(api.ReloadRefused, rl.hash, keys, "these keys changed and need a restart: "+list, keys[0])
}

// firstKey is the key of a configuration error's first mistake, if it
// names one.
func firstKey(err error) string {
	var one *config.Error
	if errors.As(err, &one) {
		return one.Key
	}
	return ""
}
