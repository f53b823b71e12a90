package api

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Flush shards write the stream's data frames. A server has one shard per
// CPU (GOMAXPROCS), each with one goroutine; a connection belongs to one
// shard. Pushing a message into a connection's empty send queue puts the
// connection on its shard's dirty list; the shard's goroutine takes the
// list, and for each connection frames everything queued and writes it with
// one non-blocking write(2).
//
// So a fan-out makes at most a few goroutines runnable, not one per
// subscriber, and under load each write carries every message queued for
// the connection since its last one. A write the socket does not take whole
// (a client reading slowly) hands the connection to its own writer
// goroutine (wsConn.drain), which writes with blocking writes, under the
// keepalive's WriteWait, until the queue is empty; the shard never waits
// for a client.
type flushShard struct {
	mu    sync.Mutex
	dirty []*wsConn
	wake  chan struct{} // buffered 1: dirty went from empty to not empty

	sent prometheus.Counter // once per pass, not per connection
}

type flushShards struct {
	shards []*flushShard
	next   atomic.Uint32
	wg     sync.WaitGroup
}

func newFlushShards(sent prometheus.Counter) *flushShards {
	n := max(runtime.GOMAXPROCS(0), 1)
	f := &flushShards{shards: make([]*flushShard, n)}
	for i := range f.shards {
		f.shards[i] = &flushShard{wake: make(chan struct{}, 1), sent: sent}
	}
	return f
}

// pick assigns a new connection to a shard, round robin.
func (f *flushShards) pick() *flushShard {
	return f.shards[int(f.next.Add(1))%len(f.shards)]
}

// start runs the shards' goroutines until stop closes; wait for them with
// f.wg.
func (f *flushShards) start(stop <-chan struct{}) {
	for _, sh := range f.shards {
		f.wg.Go(func() { sh.run(stop) })
	}
}

// add puts c on the dirty list.
func (sh *flushShard) add(c *wsConn) {
	sh.mu.Lock()
	sh.dirty = append(sh.dirty, c)
	first := len(sh.dirty) == 1
	sh.mu.Unlock()
	if first {
		select {
		case sh.wake <- struct{}{}:
		default:
		}
	}
}

func (sh *flushShard) run(stop <-chan struct{}) {
	var (
		spare   []*wsConn
		scratch []byte
	)
	for {
		select {
		case <-stop:
			return
		case <-sh.wake:
		}
		sh.mu.Lock()
		list := sh.dirty
		sh.dirty = spare[:0]
		sh.mu.Unlock()
		var sent int
		for _, c := range list {
			var n int
			n, scratch = c.flushNow(scratch[:0])
			sent += n
		}
		if sent > 0 {
			sh.sent.Add(float64(sent))
		}
		clear(list)
		spare = list
		if cap(scratch) > maxKeptBuffer {
			scratch = nil
		}
	}
}

// flushNow writes what c has queued without blocking, framed in buf, and
// returns how many messages went and buf. What the socket does not take,
// and a socket busy with another write, go to c's writer goroutine.
func (c *wsConn) flushNow(buf []byte) (int, []byte) {
	out := c.out
	if !out.mu.TryLock() { // a blocking write (a control frame) is under way
		c.handOver()
		return 0, buf
	}
	defer out.mu.Unlock()
	msgs := c.queue.take()
	if msgs == nil {
		return 0, buf // the writer drains this queue now
	}
	defer c.queue.done(msgs)
	if out.stopped || len(msgs) == 0 {
		return 0, buf
	}
	for _, msg := range msgs {
		buf = appendTextFrame(buf, msg)
	}
	if len(out.unsent) > 0 || out.aborting.Load() { // the writer has not written it yet: stay behind it
		out.unsent = append(out.unsent, buf...)
		c.handOver()
		return len(msgs), buf
	}
	n, err := out.writeNow(buf)
	switch {
	case out.aborted(err): // a slow client: the writer closes
		out.keepUnsentLocked(buf, 0, n)
		c.handOver()
		return len(msgs), buf
	case err != nil:
		_ = out.Close() // the reader and the writer end
		return 0, buf
	}
	if n < len(buf) {
		out.keepUnsentLocked(buf, 0, n)
		c.handOver()
	} else {
		c.signalWrote()
	}
	return len(msgs), buf
}

// drain is the writer goroutine's side: it writes what is unsent and
// queued, blocking, until the queue is empty, and then gives the queue back
// to the shard (unless the connection has no shard).
func (c *wsConn) drain(buf []byte) ([]byte, error) {
	out := c.out
	c.writingSince.Store(c.srv.clock.Now().UnixNano())
	defer c.writingSince.Store(0)
	for {
		out.mu.Lock()
		if err := out.writeUnsentLocked(); err != nil {
			out.mu.Unlock()
			return buf, err
		}
		if out.aborting.Load() { // a slow client: the writer closes
			out.mu.Unlock()
			return buf, errAborted
		}
		msgs := c.queue.takeOrRelease()
		if len(msgs) == 0 {
			out.mu.Unlock()
			c.signalWrote()
			return buf, nil
		}
		if out.stopped { // a close frame went: drop what is queued
			out.mu.Unlock()
			c.queue.done(msgs)
			continue
		}
		buf = buf[:0]
		for _, msg := range msgs {
			buf = appendTextFrame(buf, msg)
		}
		n, err := out.Conn.Write(buf)
		if err != nil {
			out.keepUnsentLocked(buf, 0, n)
		}
		out.mu.Unlock()
		c.queue.done(msgs)
		if err != nil {
			return buf, err
		}
		c.srv.metrics.wsSent.Add(float64(len(msgs)))
		c.signalWrote()
		c.writingSince.Store(c.srv.clock.Now().UnixNano())
		if cap(buf) > maxKeptBuffer {
			buf = nil
		}
	}
}

func (c *wsConn) handOver() {
	c.srv.metrics.wsHandoffs.Inc()
	c.queue.handOver()
}

func (c *wsConn) signalWrote() {
	select {
	case c.wrote <- struct{}{}:
	default:
	}
}
