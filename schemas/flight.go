package schemas

import (
	"context"
	"sync"
)

// flight runs one call per key at a time: concurrent callers for the same key
// wait for the first one's result instead of repeating its HTTP request.
// Results are not kept; callers cache what should be cached.
type flight[K comparable, V any] struct {
	mu    sync.Mutex
	calls map[K]*flightCall[V]
}

type flightCall[V any] struct {
	done chan struct{}
	val  V
	err  error
}

// do calls fn for key unless a call for key is running, in which case it waits
// for that call's result or for ctx to end.
func (g *flight[K, V]) do(ctx context.Context, key K, fn func() (V, error)) (V, error) {
	g.mu.Lock()
	if c, ok := g.calls[key]; ok {
		g.mu.Unlock()
		select {
		case <-c.done:
			return c.val, c.err
		case <-ctx.Done():
			var zero V
			return zero, ctx.Err()
		}
	}
	if g.calls == nil {
		g.calls = make(map[K]*flightCall[V])
	}
	c := &flightCall[V]{done: make(chan struct{})}
	g.calls[key] = c
	g.mu.Unlock()

	defer func() {
		g.mu.Lock()
		delete(g.calls, key)
		g.mu.Unlock()
		close(c.done)
	}()
	c.val, c.err = fn()
	return c.val, c.err
}
