package timeouts_test

import (
	"fmt"
	"time"

	"github.com/switchboard-mcp/switchboard/timeouts"
)

// The router's event loop owns the wheel: it schedules each intent's absolute
// deadline, cancels it when the answer comes, and on each tick of its clock
// calls Advance with the current time.
func ExampleWheel() {
	const now = int64(1_700_000_000_000) // clock.Now().UnixMilli() in the router

	w, err := timeouts.NewWheel[string](time.Millisecond, now)
	if err != nil {
		panic(err)
	}
	w.Schedule(now+250, "intent-a")
	b := w.Schedule(now+300, "intent-b")
	w.Schedule(now+5000, "intent-c")

	w.Cancel(b) // intent-b was answered in time

	expire := func(deadlineMs int64, intentID string) {
		fmt.Printf("%s timed out (deadline now%+dms)\n", intentID, deadlineMs-now)
	}
	fmt.Println("fired:", w.Advance(now+1000, expire))
	fmt.Println("pending:", w.Len())
	// Output:
	// intent-a timed out (deadline now+250ms)
	// fired: 1
	// pending: 1
}

func ExampleFallbackCache() {
	const now = int64(1_700_000_000_000)

	c := timeouts.NewFallbackCache(10_000)
	c.Put("fx.quote", "EURUSD", `{"rate":1.08}`, now-30_000)

	if answer, at, ok := c.Get("fx.quote", "EURUSD", time.Minute, now); ok {
		fmt.Printf("fallback %s from %ds ago\n", answer, (now-at)/1000)
	}
	if _, _, ok := c.Get("fx.quote", "EURUSD", 10*time.Second, now); !ok {
		fmt.Println("too old for a 10s max age")
	}
	// Output:
	// fallback {"rate":1.08} from 30s ago
	// too old for a 10s max age
}
