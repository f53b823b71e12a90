package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// --pprof serves the heap profile on its own listener and stops with serve.
func TestProfilesAreServedOnTheirOwnListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var logs strings.Builder
	if err := startProfiling(ctx, addr, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "heap profile") {
		t.Fatalf("heap profile: %d %.80q", resp.StatusCode, body)
	}
	if !strings.Contains(logs.String(), "profiles served") {
		t.Fatalf("not logged: %q", logs.String())
	}
	if err := startProfiling(ctx, addr, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil || !strings.Contains(err.Error(), "--pprof "+addr) {
		t.Fatalf("a taken address: %v", err)
	}
	cancel()
	if err := waitClosed(addr); err != nil {
		t.Fatal(err)
	}
}

// waitClosed waits, up to 30 s, until nothing accepts connections at addr
// (the listener is shut down on a goroutine of its own).
func waitClosed(addr string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return nil
		}
		_ = c.Close()
		runtime.Gosched()
	}
	return fmt.Errorf("%s still accepts connections 30 s after serve ended", addr)
}
