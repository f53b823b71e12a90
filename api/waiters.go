package api

import (
	"context"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// waiter is one Wait (or ?wait request) for one intent's result.
type waiter struct {
	key intentKey
	c   chan *schemas.IntentResult // buffered 1: wake never blocks on it
}

// waiters are the Wait calls blocked on an intent's result, by intent.
// Guarded by Results.mu: the store's check and a waiter's registration
// happen under the same lock as a result's arrival, so none is missed.
type waiters map[intentKey][]*waiter

// add registers a waiter for k.
func (ws waiters) add(k intentKey) *waiter {
	w := &waiter{key: k, c: make(chan *schemas.IntentResult, 1)}
	ws[k] = append(ws[k], w)
	return w
}

// wake hands res to every waiter of k and forgets them.
func (ws waiters) wake(k intentKey, res *schemas.IntentResult) {
	for _, w := range ws[k] {
		w.c <- res
	}
	delete(ws, k)
}

// remove forgets w if wake has not already.
func (ws waiters) remove(w *waiter) {
	list := ws[w.key]
	for i, x := range list {
		if x == w {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(ws, w.key)
	} else {
		ws[w.key] = list
	}
}

// Wait returns the result of tenant's intent intentID: at once if it is in
// the store, else when Add brings it, or ctx's error when ctx ends first. The
// check of the store and the registration of the waiter happen under one
// lock, so a result added in between is never missed.
func (r *Results) Wait(ctx context.Context, tenant, intentID string) (*schemas.IntentResult, error) {
	res, w := r.await(intentKey{tenant, intentID})
	if res != nil {
		return res, nil
	}
	defer r.release(w)
	select {
	case res := <-w.c:
		return res, nil
	case <-ctx.Done():
		select { // a result that landed at the same moment wins
		case res := <-w.c:
			return res, nil
		default:
			return nil, ctx.Err()
		}
	}
}

// await returns the stored result of an intent or, if there is none yet, a
// registered waiter that Add will wake. The caller must release the waiter.
func (r *Results) await(k intentKey) (*schemas.IntentResult, *waiter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.st.get(k); e != nil && e.res != nil {
		return e.res, nil
	}
	return nil, r.waiters.add(k)
}

// release unregisters a waiter if Add has not already woken it. It accepts nil.
func (r *Results) release(w *waiter) {
	if w == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waiters.remove(w)
}
