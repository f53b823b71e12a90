package mcp

import (
	"sync"

	"github.com/switchboard-mcp/switchboard/api"
)

// Progress is one progress report of an intent's agent: how far it is
// (Progress, increasing), out of Total when known (0: unknown), and a
// message for people.
type Progress struct {
	Progress float64
	Total    float64
	Message  string
}

// ProgressSource delivers an intent's progress reports as they arrive. A
// tools/call that carries a progress token subscribes to its intent and
// forwards each report as notifications/progress, in order, until the
// result comes.
//
// SubscribeProgress calls f for every report of the intent (tenant, id)
// from now on, in order, from one goroutine at a time, until stop is
// called; after stop returns, f is not called again. It must not block on
// f's caller, and must be safe for concurrent use.
//
// [WatchProgress] implements it on the API's [api.Results], which the
// progress topic feeds.
type ProgressSource interface {
	SubscribeProgress(tenant, intentID string, f func(Progress)) (stop func())
}

// noProgress is the source when none is configured: nothing ever arrives.
type noProgress struct{}

func (noProgress) SubscribeProgress(string, string, func(Progress)) func() { return func() {} }

// WatchProgress is the ProgressSource of an [api.Results] fed from the
// progress topic: each subscription is an [api.Watch] of the intent, read by
// a goroutine of its own until the result, an overflow or stop.
//
// A subscription holds at most watchBuffer progress records and MaxBytes
// bytes of them for its reader (the session's stream); a reader further
// behind loses the rest of the intent's progress (the call still gets its
// result), counted by [api.Results.WatchOverflows].
type WatchProgress struct {
	Results *api.Results
	// MaxBytes bounds each subscription's records in bytes (estimated):
	// http.websocket.send_queue_bytes, like an event stream's. 0:
	// api.DefaultSendQueueBytes.
	MaxBytes int
}

// watchBuffer is how many progress records a subscription holds for its
// reader.
const watchBuffer = 256

// SubscribeProgress implements [ProgressSource]. The reported progress is
// the agent's own figure when it gives one and never goes back (MCP asks
// for increasing values), else the record's sequence number.
func (wp WatchProgress) SubscribeProgress(tenant, intentID string, f func(Progress)) func() {
	var scope *string
	if tenant != "" {
		scope = &tenant
	}
	limit := api.WatchLimit{Events: watchBuffer, Bytes: wp.MaxBytes}
	if limit.Bytes <= 0 {
		limit.Bytes = api.DefaultSendQueueBytes
	}
	w := wp.Results.Watch(scope, intentID, limit)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := 0.0
		for {
			select {
			case <-done:
				return
			case ev, ok := <-w.Events():
				if !ok || ev.Progress == nil {
					return
				}
				p := ev.Progress
				r := Progress{Progress: float64(p.Sequence)}
				if p.Progress != nil {
					r.Progress = *p.Progress
				}
				if p.Total != nil {
					r.Total = *p.Total
				}
				if p.Message != nil {
					r.Message = *p.Message
				}
				if r.Progress <= last {
					r.Progress = last // never backwards; sent anyway for its message
				}
				last = r.Progress
				f(r)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			w.Close()
			wg.Wait()
		})
	}
}
