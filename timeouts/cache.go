package timeouts

import (
	"math"
	"time"
)

// cacheKey identifies a cached answer. A struct key lets Get look up without
// building a combined string.
type cacheKey struct {
	intentType, key string
}

type cacheEntry struct {
	key        cacheKey
	answer     string
	atMs       int64
	prev, next int32 // recency list, most recent at the front
}

// FallbackCache keeps the last good answer per (intent type, cache key), for
// the router to answer with when an agent times out. It holds at most its
// capacity of answers and evicts the least recently used one to make room.
//
// It is not safe for concurrent use: the router's event loop owns it. It reads
// no clock; times are unix milliseconds passed in. It keeps the strings it is
// given.
type FallbackCache struct {
	capacity   int
	index      map[cacheKey]int32
	entries    []cacheEntry
	head, tail int32
}

// NewFallbackCache returns an empty cache that holds at most capacity answers.
// A capacity below 1 gives a cache that stores nothing.
func NewFallbackCache(capacity int) *FallbackCache {
	return &FallbackCache{
		capacity: min(capacity, math.MaxInt32),
		index:    make(map[cacheKey]int32),
		head:     nilIndex,
		tail:     nilIndex,
	}
}

// Len returns the number of answers held.
func (c *FallbackCache) Len() int { return len(c.entries) }

// Put records answer (JSON text) as the answer for (intentType, key) produced
// at atMs, unless the cache already holds a newer one for that key: a late,
// older answer never replaces a newer one. Either way the key becomes the most
// recently used. When the cache is full, a new key evicts the least recently
// used one.
func (c *FallbackCache) Put(intentType, key, answer string, atMs int64) {
	if c.capacity < 1 {
		return
	}
	k := cacheKey{intentType, key}
	if i, ok := c.index[k]; ok {
		e := &c.entries[i]
		if atMs >= e.atMs {
			e.answer, e.atMs = answer, atMs
		}
		c.touch(i)
		return
	}
	var i int32
	if len(c.entries) < c.capacity {
		c.entries = append(c.entries, cacheEntry{})
		i = int32(len(c.entries) - 1)
	} else {
		i = c.tail
		c.unlink(i)
		delete(c.index, c.entries[i].key)
	}
	c.entries[i] = cacheEntry{key: k, answer: answer, atMs: atMs}
	c.index[k] = i
	c.pushFront(i)
}

// Get returns the answer for (intentType, key) and when it was produced. ok is
// false when there is none, or when it is older than maxAge at nowMs; a maxAge
// of zero or less sets no limit. A hit makes the key the most recently used.
func (c *FallbackCache) Get(intentType, key string, maxAge time.Duration, nowMs int64) (answer string, atMs int64, ok bool) {
	i, found := c.index[cacheKey{intentType, key}]
	if !found {
		return "", 0, false
	}
	e := &c.entries[i]
	if maxAge > 0 && nowMs-e.atMs > int64(maxAge/time.Millisecond) {
		return "", 0, false
	}
	c.touch(i)
	return e.answer, e.atMs, true
}

func (c *FallbackCache) touch(i int32) {
	if c.head != i {
		c.unlink(i)
		c.pushFront(i)
	}
}

func (c *FallbackCache) pushFront(i int32) {
	e := &c.entries[i]
	e.prev, e.next = nilIndex, c.head
	if c.head != nilIndex {
		c.entries[c.head].prev = i
	} else {
		c.tail = i
	}
	c.head = i
}

func (c *FallbackCache) unlink(i int32) {
	e := &c.entries[i]
	if e.prev != nilIndex {
		c.entries[e.prev].next = e.next
	} else {
		c.head = e.next
	}
	if e.next != nilIndex {
		c.entries[e.next].prev = e.prev
	} else {
		c.tail = e.prev
	}
}
