package api_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard/api"
)

func TestResultsGetAndEviction(t *testing.T) {
	r := api.NewResults(2)
	r.Add(nil)                 // ignored
	r.Add(result("", "x", "")) // ignored
	r.Add(result("a", "echo", ""))
	r.Add(result("b", "echo", ""))
	r.Add(result("a", "echo", "")) // a redelivery does not take a place
	if _, ok := r.Get("", "a"); !ok {
		t.Fatal("a missing")
	}
	r.Add(result("c", "echo", ""))
	if _, ok := r.Get("", "a"); ok {
		t.Fatal("a, the oldest, was not evicted")
	}
	for _, id := range []string{"b", "c"} {
		if res, ok := r.Get("", id); !ok || res.IntentID != id {
			t.Fatalf("Get(%s) = %v, %v", id, res, ok)
		}
	}
}

func TestResultsWaitReturnsAtOnceWhenStored(t *testing.T) {
	r := api.NewResults(0)
	r.Add(result("a", "echo", ""))
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // even a dead context gets a stored result
	res, err := r.Wait(ctx, "", "a")
	if err != nil || res.IntentID != "a" {
		t.Fatalf("Wait = %v, %v", res, err)
	}
}

func TestResultsWaitEndsWithItsContext(t *testing.T) {
	r := api.NewResults(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.Wait(ctx, "", "a")
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	// The abandoned waiter is gone: a later Add must not trip over it.
	mustNotBlock(t, "Add", func() { r.Add(result("a", "echo", "")) })
}

// Many waiters racing many Adds: every waiter gets its result, whether it
// registered before or after the Add.
func TestResultsWaitNeverMissesAConcurrentAdd(t *testing.T) {
	const n = 500
	r := api.NewResults(n)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		id := "i-" + strconv.Itoa(i)
		for range 2 { // two waiters per intent
			wg.Go(func() {
				res, err := r.Wait(ctx, "", id)
				if err == nil && res.IntentID != id {
					err = errors.New("wrong result " + res.IntentID + " for " + id)
				}
				if err != nil {
					errs <- err
				}
			})
		}
		wg.Go(func() { r.Add(result(id, "echo", "")) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestResultsAddNeverWaitsForASubscriber(t *testing.T) {
	r := api.NewResults(0)
	var got [][]byte
	unsubscribe := api.SubscribeSession(r, "s", func(msg []byte) { got = append(got, msg) })
	r.Add(result("a", "echo", "s"))
	r.Add(result("b", "echo", "other"))
	unsubscribe()
	r.Add(result("c", "echo", "s"))
	if len(got) != 1 || string(got[0]) != `{"type":"result","result":{"intent_id":"a","intent_type":"echo","agent":"agent-a","outcome":"answered","answer":{"ok":true},"session_id":"s","attempts":1,"timeline":{"received_at":1,"resolved_at":2,"deadline":3}}}` {
		t.Fatalf("delivered %q", got)
	}
}
