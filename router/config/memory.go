package config

import (
	"fmt"
	"slices"
	"strings"
)

// The process's memory budget, router.memory_limit_bytes, and the byte
// budgets that live inside it. Without it, each budget has its default and
// 'serve' derives Go's soft memory limit from their sum (896 MiB for the
// process with the defaults). With it, the budgets must fit inside it by
// construction: the unset ones are derived from it (setMemoryDefaults), and
// a file whose explicit values cannot fit is refused (validateMemory),
// instead of 'serve' starting with budgets whose sum passes the process's.
// (Measured before this: with a 298 MiB budget the result store alone could
// hold 128 MiB of answers, and the resident set peaked at 437 MiB while
// 1 MB answers flowed back; BENCHMARKS.md.)

const (
	// MemoryBaseline is what an instance's Go runtime holds besides its
	// byte budgets: code, goroutines, the router's and the API's tables,
	// codecs, HTTP buffers (an idle 'serve' holds 18 MB of heap and about
	// 50 MiB resident in all; BENCHMARKS.md).
	MemoryBaseline = 64 << 20
	// OutsideGoWorkingSet is what librdkafka and the C allocator hold under
	// load beyond the prefetch bounds and the lookup cache: the producers'
	// copies of records until they are acknowledged, and freed buffers the
	// C allocator keeps (measured: about 95 MiB outside Go in all with 1 MB
	// intents flowing, 32 of them prefetch and cache).
	OutsideGoWorkingSet = 64 << 20
	// StreamQueuesCounted is how many full send queues of
	// http.websocket.send_queue_bytes the budget makes room for: a WebSocket
	// client's, an event stream's, an MCP call's progress. A reader whose
	// queue is full is dropped (1013, slow_consumer, the call's progress
	// stops), so many full at once is rare.
	StreamQueuesCounted = 4

	// DefaultPrefetchBytes bounds what librdkafka prefetches for the router
	// (queued.max.messages.kbytes, fetch.max.bytes) without a process budget.
	DefaultPrefetchBytes = 16 << 20
	// DefaultPollQueueBytes bounds the records on their way from the
	// router's poll goroutine to its loop without a process budget.
	DefaultPollQueueBytes = 32 << 20
	// DefaultResultsMaxBytes is the API's default result store budget
	// (api.DefaultResultsMaxBytes).
	DefaultResultsMaxBytes = 128 << 20
	// DefaultSendQueueBytes is the API's default WebSocket send queue
	// budget (api.DefaultSendQueueBytes).
	DefaultSendQueueBytes = 8 << 20

	// minBuffer is the least a derived prefetch or poll queue bound may be:
	// a few records of the largest size (fetch.max.bytes must also be at
	// least message.max.bytes).
	minBuffer = 4 << 20
)

// Memory is how the process's memory is shared out between the byte
// budgets: what 'serve' gives Go's runtime as its soft limit, what lives in
// Go's heap and what librdkafka and pebble hold outside it.
type Memory struct {
	// Process is router.memory_limit_bytes; 0: none (GoLimit is then the sum
	// of the Go-side budgets and MemoryBaseline).
	Process int64
	// GoLimit is Go's soft memory limit: Process less OutsideGo.
	GoLimit int64
	// The Go-side budgets: router.max_pending_bytes, http.results_max_bytes
	// and StreamQueuesCounted × http.websocket.send_queue_bytes.
	Pending, Results, StreamQueues int64
	// Waiting and Reading are the Go-side budgets callers fill with their
	// requests: http.max_waiting_bytes (what waiting callers' requests
	// hold) and http.max_reading_bytes (the bodies being read).
	Waiting, Reading int64
	// PollQueue bounds the bytes of the records on their way from the
	// router's poll goroutine to its loop (router.WithQueueBytes).
	PollQueue int64
	// Prefetch bounds librdkafka's prefetch for the router's consumer, and
	// FeedPrefetch for the reader of the results topics that feeds the API
	// (0: librdkafka's default, 64 MiB, without a process budget).
	Prefetch, FeedPrefetch int64
	// LookupCache is http.lookup.cache_mb in bytes.
	LookupCache int64
	// OutsideGo is Prefetch + FeedPrefetch + LookupCache +
	// OutsideGoWorkingSet: C memory Go's limit does not see.
	OutsideGo int64
	// Derived names the keys derived from router.memory_limit_bytes
	// because the file left them unset.
	Derived []string
}

// Memory returns how the process's memory is shared out (after defaults).
func (c *Config) Memory() Memory {
	m := Memory{
		Process: max(c.Router.MemoryLimitBytes, 0), Pending: c.Router.MaxPendingBytes,
		Results: c.HTTP.ResultsMaxBytes, StreamQueues: int64(c.HTTP.WebSocket.SendQueueBytes),
		PollQueue: DefaultPollQueueBytes, Prefetch: DefaultPrefetchBytes,
		LookupCache: int64(c.HTTP.Lookup.CacheMB) << 20, Derived: slices.Clone(c.derived),
		Waiting: c.HTTP.MaxWaitingBytes, Reading: c.HTTP.MaxReadingBytes,
	}
	if m.Results <= 0 {
		m.Results = DefaultResultsMaxBytes
	}
	if m.Waiting <= 0 {
		m.Waiting = DefaultMaxWaitingBytes
	}
	if m.Reading <= 0 {
		m.Reading = DefaultMaxReadingBytes
	}
	if m.StreamQueues <= 0 {
		m.StreamQueues = DefaultSendQueueBytes
	}
	m.StreamQueues *= StreamQueuesCounted
	if m.Process > 0 {
		share := m.Process / 32
		m.Prefetch = clamp(share, minBuffer, DefaultPrefetchBytes)
		m.FeedPrefetch = m.Prefetch
		m.PollQueue = clamp(share, minBuffer, DefaultPollQueueBytes)
	}
	m.OutsideGo = m.Prefetch + m.FeedPrefetch + m.LookupCache + OutsideGoWorkingSet
	m.GoLimit = m.goNeed()
	if m.Process > 0 {
		m.GoLimit = m.Process - m.OutsideGo
	}
	return m
}

// goNeed is what Go's share must hold: the baseline and the Go-side
// budgets.
func (m Memory) goNeed() int64 {
	return MemoryBaseline + m.Pending + m.Results + m.StreamQueues + m.Waiting + m.Reading
}

func clamp(v, lo, hi int64) int64 { return min(max(v, lo), hi) }

// setMemoryDefaults derives, when router.memory_limit_bytes is set, the
// byte budgets the file leaves unset: the lookup cache (a 32nd of the
// budget, 4–16 MiB), the result store (a 16th, 4–128 MiB), the WebSocket
// send queues (a 128th each, 2–8 MiB), what waiting callers' requests
// hold (http.max_waiting_bytes, a 32nd, 1–256 MiB), the bodies being read
// (http.max_reading_bytes, a 64th, 1–64 MiB: the defaults are reached at
// 8 GiB), and the pending intents' budget: what Go's share leaves after
// the baseline and those. It runs before the other budgets' defaults,
// which then leave the derived values alone (the per-tenant shares are
// then half of the derived values).
func (c *Config) setMemoryDefaults() {
	p := c.Router.MemoryLimitBytes
	if p <= 0 {
		return
	}
	if c.HTTP.Lookup.CacheMB == 0 {
		c.HTTP.Lookup.CacheMB = int(clamp(p/32>>20, 4, DefaultLookupCacheMB))
		c.derived = append(c.derived, "http.lookup.cache_mb")
	}
	if c.HTTP.ResultsMaxBytes == 0 {
		c.HTTP.ResultsMaxBytes = clamp(p/16, 4<<20, DefaultResultsMaxBytes)
		c.derived = append(c.derived, "http.results_max_bytes")
	}
	if c.HTTP.WebSocket.SendQueueBytes == 0 {
		c.HTTP.WebSocket.SendQueueBytes = int(clamp(p/128, 2<<20, DefaultSendQueueBytes))
		c.derived = append(c.derived, "http.websocket.send_queue_bytes")
	}
	if c.HTTP.MaxWaitingBytes == 0 {
		c.HTTP.MaxWaitingBytes = clamp(p/32, 1<<20, DefaultMaxWaitingBytes)
		c.derived = append(c.derived, "http.max_waiting_bytes")
	}
	if c.HTTP.MaxReadingBytes == 0 {
		c.HTTP.MaxReadingBytes = clamp(p/64, 1<<20, DefaultMaxReadingBytes)
		c.derived = append(c.derived, "http.max_reading_bytes")
	}
	if c.Router.MaxPendingBytes == 0 {
		m := c.Memory()
		m.Pending = 0
		// Below the least, validateMemory says that the budget is too small.
		c.Router.MaxPendingBytes = max(m.GoLimit-m.goNeed(), minPendingBytes)
		c.derived = append(c.derived, "router.max_pending_bytes")
	}
}

// validateMemory refuses, when router.memory_limit_bytes is set, byte
// budgets that cannot fit inside it: Go's share (the budget less what is
// held outside Go) must hold the baseline, the result store, the stream
// queues, the waiting callers' and the bodies being read's bytes, and the
// pending intents. The error names the largest of the
// values the file sets, or the budget itself when every one was derived.
func (c *Config) validateMemory(add func(msg string, path ...string)) {
	m := c.Memory()
	if m.Process <= 0 {
		return
	}
	need := m.goNeed()
	if need <= m.GoLimit {
		return
	}
	detail := fmt.Sprintf("Go's share is %d MiB (the budget less %d MiB outside Go: prefetch, lookup cache, librdkafka), and it must hold the %d MiB baseline, http.results_max_bytes %d MiB, %d WebSocket send queues %d MiB, http.max_waiting_bytes %d MiB, http.max_reading_bytes %d MiB and router.max_pending_bytes %d MiB: %d MiB",
		m.GoLimit>>20, m.OutsideGo>>20, MemoryBaseline>>20, m.Results>>20, StreamQueuesCounted, m.StreamQueues>>20, m.Waiting>>20, m.Reading>>20, m.Pending>>20, need>>20)
	explicit := []struct {
		v    int64
		path []string
	}{
		{m.Pending, []string{"router", "max_pending_bytes"}},
		{m.Results, []string{"http", "results_max_bytes"}},
		{m.StreamQueues, []string{"http", "websocket", "send_queue_bytes"}},
		{m.Waiting, []string{"http", "max_waiting_bytes"}},
		{m.Reading, []string{"http", "max_reading_bytes"}},
		{m.LookupCache, []string{"http", "lookup", "cache_mb"}},
	}
	var worst []string
	var most int64
	for _, e := range explicit {
		if !slices.Contains(c.derived, joinKey(e.path)) && e.v > most {
			worst, most = e.path, e.v
		}
	}
	if worst == nil {
		add(fmt.Sprintf("%d bytes is too small for an instance: %s; at least %d bytes", m.Process, detail, c.leastMemory()), "router", "memory_limit_bytes")
		return
	}
	add(fmt.Sprintf("does not fit router.memory_limit_bytes (%d bytes): %s; lower it, or leave it unset to derive it from the budget", m.Process, detail), worst...)
}

func joinKey(path []string) string { return strings.Join(path, ".") }

// leastMemory is the least router.memory_limit_bytes, in whole MiB, whose
// derived budgets fit (the keys c derived derived again at each size).
func (c *Config) leastMemory() int64 {
	for p := (c.Router.MemoryLimitBytes>>20 + 1) << 20; ; p += 1 << 20 {
		t := *c
		t.derived = nil
		t.Router.MemoryLimitBytes = p
		for _, k := range c.derived {
			switch k {
			case "http.lookup.cache_mb":
				t.HTTP.Lookup.CacheMB = 0
			case "http.results_max_bytes":
				t.HTTP.ResultsMaxBytes = 0
			case "http.websocket.send_queue_bytes":
				t.HTTP.WebSocket.SendQueueBytes = 0
			case "http.max_waiting_bytes":
				t.HTTP.MaxWaitingBytes = 0
			case "http.max_reading_bytes":
				t.HTTP.MaxReadingBytes = 0
			case "router.max_pending_bytes":
				t.Router.MaxPendingBytes = 0
			}
		}
		t.setMemoryDefaults()
		if m := t.Memory(); m.goNeed() <= m.GoLimit {
			return p
		}
	}
}
