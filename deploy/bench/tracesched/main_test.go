package main

import (
	"bytes"
	"runtime"
	"runtime/trace"
	"strings"
	"sync"
	"testing"
	"time"
)

// yielder yields n times and blocks once on done.
func yielder(n int, done <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	for range n {
		runtime.Gosched()
	}
	<-done
}

func TestAnalyzeAttributesRunnableTimeToItsCause(t *testing.T) {
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go yielder(500, done, &wg)
	// The yielder has yielded 500 times once it blocks on done; then let
	// it go.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if blockedInYielder() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the yielder never blocked")
		}
		runtime.Gosched()
	}
	close(done)
	wg.Wait()
	trace.Stop()

	gs, span, err := analyze(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if span <= 0 {
		t.Fatalf("span %v", span)
	}
	var found *goroutine
	for _, g := range gs {
		if strings.Contains(g.name, "yielder") {
			found = g
		}
	}
	if found == nil {
		t.Fatal("no goroutine named after yielder")
	}
	if n := found.runnableAfterN["Running/runtime.Gosched"]; n < 500 {
		t.Errorf("runnable after runtime.Gosched %d times, want at least 500 (%v)", n, found.runnableAfterN)
	}
	if found.waitingOn["chan receive"] <= 0 {
		t.Errorf("no time blocked on its channel receive: %v", found.waitingOn)
	}
	if found.running <= 0 {
		t.Error("no running time")
	}
}

// blockedInYielder reports whether the yielder's goroutine is blocked on
// its channel.
func blockedInYielder() bool {
	var stacks [64 << 10]byte
	n := runtime.Stack(stacks[:], true)
	for _, g := range strings.Split(string(stacks[:n]), "\n\n") {
		if strings.Contains(g, ".yielder(") {
			return strings.Contains(g, "[chan receive")
		}
	}
	return false
}
