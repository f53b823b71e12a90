package timeouts_test

import (
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/timeouts"
)

func TestFallbackCacheGet(t *testing.T) {
	c := timeouts.NewFallbackCache(10)
	if _, _, ok := c.Get("quote", "eu", 0, start); ok {
		t.Fatal("hit on an empty cache")
	}
	c.Put("quote", "eu", `{"p":1}`, start)
	answer, at, ok := c.Get("quote", "eu", time.Minute, start+500)
	if !ok || answer != `{"p":1}` || at != start {
		t.Fatalf("Get = %q, %d, %v", answer, at, ok)
	}
	// The two halves of the key are kept apart: no "quote"+"eu" collisions.
	c.Put("quotee", "u", `{"p":2}`, start)
	if a, _, _ := c.Get("quote", "eu", 0, start); a != `{"p":1}` {
		t.Fatalf("key collision: %q", a)
	}
	if _, _, ok := c.Get("quote", "us", 0, start); ok {
		t.Fatal("hit on another key")
	}
	if c.Len() != 2 {
		t.Fatalf("Len() = %d", c.Len())
	}
}

func TestFallbackCacheMaxAge(t *testing.T) {
	c := timeouts.NewFallbackCache(10)
	c.Put("quote", "eu", "1", start)
	for _, tc := range []struct {
		maxAge time.Duration
		now    int64
		ok     bool
	}{
		{time.Second, start + 1000, true}, // exactly maxAge old
		{time.Second, start + 1001, false},
		{1500 * time.Microsecond, start + 1, true},
		{1500 * time.Microsecond, start + 2, false},
		{time.Second, start - 5000, true}, // produced "in the future": clock skew
		{0, start + 365*day.Milliseconds(), true},
		{-time.Second, start + 365*day.Milliseconds(), true},
	} {
		if _, _, ok := c.Get("quote", "eu", tc.maxAge, tc.now); ok != tc.ok {
			t.Errorf("Get(maxAge %v, now start%+d) ok = %v, want %v", tc.maxAge, tc.now-start, ok, tc.ok)
		}
	}
	// A stale answer stays for a caller that accepts older ones.
	if _, _, ok := c.Get("quote", "eu", time.Hour, start+2000); !ok {
		t.Fatal("stale Get dropped the entry")
	}
}

func TestFallbackCacheOlderPutKeepsNewer(t *testing.T) {
	c := timeouts.NewFallbackCache(10)
	c.Put("quote", "eu", "new", start+100)
	c.Put("quote", "eu", "late", start+50) // a late response, produced earlier
	if a, at, _ := c.Get("quote", "eu", 0, start+200); a != "new" || at != start+100 {
		t.Fatalf("Get = %q, %d after an older Put", a, at)
	}
	c.Put("quote", "eu", "same-time", start+100)
	c.Put("quote", "eu", "newer", start+150)
	if a, at, _ := c.Get("quote", "eu", 0, start+200); a != "newer" || at != start+150 {
		t.Fatalf("Get = %q, %d after a newer Put", a, at)
	}
	if c.Len() != 1 {
		t.Fatalf("Len() = %d", c.Len())
	}
}

func TestFallbackCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := timeouts.NewFallbackCache(3)
	c.Put("t", "a", "1", start)
	c.Put("t", "b", "2", start)
	c.Put("t", "c", "3", start)
	c.Get("t", "a", 0, start)      // a is now the most recent; b the least
	c.Put("t", "c", "3'", start-1) // an ignored older Put still counts as use
	c.Put("t", "d", "4", start)    // evicts b
	if _, _, ok := c.Get("t", "b", 0, start); ok {
		t.Fatal("b survived eviction")
	}
	c.Put("t", "e", "5", start) // evicts a: c and d were used since
	for key, want := range map[string]bool{"a": false, "c": true, "d": true, "e": true} {
		if _, _, ok := c.Get("t", key, 0, start); ok != want {
			t.Errorf("Get(%s) ok = %v, want %v", key, ok, want)
		}
	}
	if c.Len() != 3 {
		t.Fatalf("Len() = %d, want 3", c.Len())
	}
	// A full cache keeps working through many evictions.
	for i := range 100 {
		c.Put("t", string(rune('A'+i%50)), "x", start+int64(i))
	}
	if c.Len() != 3 {
		t.Fatalf("Len() = %d after churn, want 3", c.Len())
	}
}

func TestFallbackCacheZeroCapacity(t *testing.T) {
	for _, capacity := range []int{0, -1} {
		c := timeouts.NewFallbackCache(capacity)
		c.Put("t", "k", "v", start)
		if _, _, ok := c.Get("t", "k", 0, start); ok || c.Len() != 0 {
			t.Errorf("capacity %d stored an answer", capacity)
		}
	}
	c := timeouts.NewFallbackCache(1)
	c.Put("t", "a", "1", start)
	c.Put("t", "b", "2", start)
	if _, _, ok := c.Get("t", "a", 0, start); ok || c.Len() != 1 {
		t.Fatal("capacity 1 kept two answers")
	}
}

func TestFallbackCacheGetDoesNotAllocate(t *testing.T) {
	c := timeouts.NewFallbackCache(100)
	c.Put("quote", "eu", "1", start)
	typ, key := "quote", "eu"
	if n := testing.AllocsPerRun(100, func() { c.Get(typ, key, time.Minute, start) }); n != 0 {
		t.Fatalf("Get allocates %v per call", n)
	}
}
