package router

import (
	"fmt"
	"math"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"time"
	"unsafe"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// The pending table's memory is bounded by bytes as well as by count: an
// intent holds its payload (up to 1 MiB) until it resolves, so a million
// small intents and a thousand large ones weigh the same.
//
//   - router.max_pending_bytes bounds every pending intent together, and
//     counts what is on its way to them: the poll goroutine pauses the
//     requests partitions once the pending bytes (published by the loop)
//     plus the bytes of the records in its queue to the loop and in its
//     backlog reach the bound, and resumes them below 90% of it (byteGate).
//     Records fetched before a pause are admitted, but they were already
//     counted, so the pending bytes stay within the bound plus the one
//     record that crossed it (at most the largest record, 1 MiB by
//     default). librdkafka's prefetch (16 MiB, router/kafkaio) never
//     reaches the table after a pause: librdkafka drops a paused
//     partition's prefetched records and fetches them again on resume. It
//     is memory all the same, counted with librdkafka's other buffers in
//     the soft memory limit 'serve' derives (cmd/switchboard/memlimit.go).
//     Before this, the table passed the bound by the poll queue (32 MiB):
//     303 MB pending at a 256 MiB bound with 1 MB intents (BENCHMARKS.md).
//   - router.max_pending_bytes_per_tenant bounds one tenant's: a tenant's new
//     intent that would pass it resolves shed at once (error code
//     tenant_budget), so that one tenant's large payloads cannot pause every
//     tenant. Intents without a tenant (authentication off, or produced to
//     Kafka directly without one) answer to the total bound only.

// CodeTenantBudget is the error code of an intent shed because its tenant's
// pending intents hold router.max_pending_bytes_per_tenant.
const CodeTenantBudget = "tenant_budget"

// pendingOverhead is what a pending intent holds besides its strings: the
// entry, its slots in the pending table, the id index, the wheel and its
// agent's queue, and the pointers of its optional fields.
var pendingOverhead = int64(unsafe.Sizeof(pending{})) + 160

// size is what p holds in memory.
func (p *pending) size() int64 {
	n := pendingOverhead + int64(len(p.id)+len(p.payload)+len(p.cacheKey))
	if p.key != p.id {
		n += int64(len(p.key))
	}
	if p.logKey != p.key {
		n += int64(len(p.logKey))
	}
	for _, s := range []*string{p.contextRef, p.sessionID, p.tenant, p.traceparent} {
		if s != nil {
			n += int64(len(*s)) + 16
		}
	}
	return n
}

// budget counts the bytes pending intents hold, in total and per tenant.
type budget struct {
	perTenant int64 // 0: no bound
	total     int64
	tenants   map[string]int64
}

func newBudget(perTenant int64) *budget {
	return &budget{perTenant: perTenant, tenants: map[string]int64{}}
}

func (b *budget) add(p *pending) {
	p.bytes = p.size()
	b.total += p.bytes
	if t := intents.TenantOf(p.tenant); t != "" {
		b.tenants[t] += p.bytes
	}
}

func (b *budget) remove(p *pending) {
	b.total -= p.bytes
	if t := intents.TenantOf(p.tenant); t != "" {
		if left := b.tenants[t] - p.bytes; left > 0 {
			b.tenants[t] = left
		} else {
			delete(b.tenants, t)
		}
	}
}

// admits reports whether p's tenant may hold p as well.
func (b *budget) admits(p *pending) bool {
	t := intents.TenantOf(p.tenant)
	return b.perTenant <= 0 || t == "" || b.tenants[t]+p.size() <= b.perTenant
}

// byteGate is the poll goroutine's pause for router.max_pending_bytes, for
// Go's soft memory limit and for the process's memory budget. It is full
// once any of them holds, and stays full until all are below 90% of their
// bound (hysteresis):
//
//   - the budget: what the pending intents cost in memory reaches
//     router.max_pending_bytes. Their cost is their bytes plus the bytes on
//     their way to the loop, times the collector's growth factor: Go lets
//     the heap grow to its goal (twice what the last collection found live,
//     GOGC=100) before it collects again, so each live byte brings up to
//     one byte of garbage with it (the record's value, the dispatch and
//     changelog encodes of the intents that came before). The factor is the
//     runtime's own goal ÷ live, between 1 and 1 + GOGC/100: 2 while the
//     soft limit is far, nearer 1 as the heap nears it (the limit then
//     lowers the goal). So the pending intents' share of the resident set
//     stays within the budget, not twice it.
//   - the heap: Go's live heap reaches 90% of Go's soft memory limit. The
//     live heap is what the last collection found live plus the bytes of
//     the records the loop has taken since that collection and of those on
//     their way (a collection finds them live only later: with 1 MB
//     intents arriving, counting them late let the heap pass its share by
//     a tenth, BENCHMARKS.md). The limit is soft: with the live heap at it
//     the collector would run back to back (for at most about half the
//     CPU, the runtime's limiter) and the heap would pass it anyway.
//     Closing intake at 90% leaves the collector a tenth of the limit to
//     work in; responses keep flowing (only the requests partitions
//     pause), so pending intents resolve and the heap comes down. What else
//     fills the heap (the API's result store, stream queues) takes its room
//     from the pending intents this way, never the other way round. Like
//     the resident set below, it counts only while intents are pending:
//     with none, pausing frees nothing, and a heap held by the result store
//     (or by answers taken since a collection that has not come, on a
//     process left idle) kept intake paused for good (measured: 135 of
//     1,000 intents answered, then nothing, BENCHMARKS.md).
//   - the process: its resident set (Linux: /proc/self/statm, read at most
//     every rssEvery) reaches 90% of the process's memory budget
//     (router.memory_limit_bytes, or the figure 'serve' derives from the
//     byte budgets; WithProcessMemory). Go's limit does not see what
//     librdkafka and the C allocator hold, nor heap pages Go has freed but
//     not yet returned; the resident set does. It counts only while
//     intents are pending: pausing intake frees nothing once none are, so
//     with nothing pending the gate lets records in whatever the resident
//     set is (a budget below what the process needs idle slows intake to
//     what resolves, it does not stop it). While the resident set or the
//     heap holds the gate closed, the gate gives memory back at most every
//     releaseEvery (gateRelease: a collection, which also brings the live
//     figure up to date, and the free pages returned to the OS).
//     Go keeps the pages it frees until its heap goal is far below them,
//     and a burst of 1 MB intents leaves hundreds of MiB of them: measured,
//     without this the resident set stayed above 90% of the budget after
//     the intents resolved, and held intake to a trickle (BENCHMARKS.md).
type byteGate struct {
	max     int64 // router.max_pending_bytes; 0: no bound
	process int64 // the process's memory budget; 0: the resident set is not watched
	full    bool
	// The cost, heap and resident figures of the last update, for the log.
	cost, live, limit, rss int64

	cycles      uint64    // the collections counted when takenAtGC was set
	takenAtGC   int64     // the loop's running total of bytes taken, as of the last collection seen
	rssAt       time.Time // when rss was read
	rssReadable bool      // the last read succeeded
	releasedAt  time.Time // when memory was last given back
	heap        heapStats // the collector's figures, read at heapAt
	heapAt      time.Time // heapNow's reading when heap was read
}

// heapEvery is how often the gate reads the collector's figures at most.
// They change when a collection ends (the live heap, the goal) or when
// someone sets GOGC or the memory limit, while the gate runs once per
// record polled: at 5,000 intents/s, runtime/metrics.Read (the heap lock,
// its aggregates, a slice of samples) was 5 % of the router's CPU. A
// collection seen up to heapEvery late only dates the gate's count of the
// bytes taken since it that much later (takenAtGC).
const heapEvery = time.Millisecond

// heapNow paces the reads of the collector's figures: the real clock, not
// the router's, since what it paces is a measurement of this process
// (tests make it read every time).
var heapNow = time.Now

// releaseEvery is how often at most the gate gives memory back while the
// resident set holds it closed: a release is a whole collection.
const releaseEvery = time.Second

// gateRelease gives memory back to the OS (tests count the calls).
var gateRelease = debug.FreeOSMemory

// rssEvery is how often the gate reads the resident set at most: a read is
// a few microseconds (open, read and parse a /proc file), too many for every
// record, and the resident set grows by at most a few records' bytes in it.
const rssEvery = 5 * time.Millisecond

// gateHeap reads the collector's figures for the gate (tests state them).
var gateHeap = readHeap

// gateRSS reads the process's resident set for the gate (tests state it);
// ok is false where it cannot be read (not Linux).
var gateRSS = readRSS

// heapStats is what the gate reads of Go's collector.
type heapStats struct {
	live   int64  // the heap the last collection marked live
	goal   int64  // the heap size at which the next collection ends
	limit  int64  // the soft memory limit; math.MaxInt64 when none
	gogc   int64  // GOGC; negative when off
	cycles uint64 // the collections completed
}

var heapSamples = []string{"/gc/heap/live:bytes", "/gc/heap/goal:bytes", "/gc/gomemlimit:bytes", "/gc/gogc:percent", "/gc/cycles/total:gc-cycles"}

// readHeap reads the collector's figures from runtime/metrics (a few
// hundred nanoseconds, no stop of the world).
func readHeap() heapStats {
	s := make([]rtmetrics.Sample, len(heapSamples))
	for i, name := range heapSamples {
		s[i].Name = name
	}
	rtmetrics.Read(s)
	v := func(i int) int64 {
		if s[i].Value.Kind() != rtmetrics.KindUint64 {
			return 0
		}
		return int64(min(s[i].Value.Uint64(), math.MaxInt64))
	}
	return heapStats{live: v(0), goal: v(1), limit: v(2), gogc: v(3), cycles: uint64(v(4))}
}

// growth is the collector's growth factor: its goal ÷ the live heap,
// between 1 and 1 + GOGC/100 (1 when GOGC is off: the limit alone bounds
// the heap then, and the heap gate watches it).
func (h heapStats) growth() float64 {
	if h.gogc < 0 {
		return 1
	}
	most := 1 + float64(h.gogc)/100
	if h.live <= 0 || h.goal <= 0 {
		return most
	}
	return max(1, min(most, float64(h.goal)/float64(h.live)))
}

// update reports whether the requests partitions stay paused: pending is
// what the pending intents hold (the loop's count), onTheirWay the bytes of
// the records queued for the loop and in the poll goroutine's backlog,
// taken the running total of the bytes of the records the loop has taken
// from its queue, now the poll goroutine's clock.
func (g *byteGate) update(pending, onTheirWay, taken int64, now time.Time) bool {
	if t := heapNow(); g.heapAt.IsZero() || t.Sub(g.heapAt) >= heapEvery || t.Before(g.heapAt) {
		g.heap, g.heapAt = gateHeap(), t
	}
	h := g.heap
	if h.cycles != g.cycles {
		g.cycles, g.takenAtGC = h.cycles, taken
	}
	g.cost = int64(float64(pending+onTheirWay) * h.growth())
	g.live, g.limit = h.live+max(0, taken-g.takenAtGC)+onTheirWay, h.limit
	overBudget, underBudget := false, true
	if g.max > 0 {
		overBudget, underBudget = g.cost >= g.max, g.cost < g.max-g.max/10
	}
	overHeap, underHeap := false, true
	if h.limit > 0 && h.limit < math.MaxInt64 && pending > 0 {
		bound := h.limit - h.limit/10
		overHeap, underHeap = g.live >= bound, g.live < bound-bound/10
	}
	overRSS, underRSS := false, true
	if g.process > 0 {
		if g.rssAt.IsZero() || now.Sub(g.rssAt) >= rssEvery || now.Before(g.rssAt) {
			g.rss, g.rssReadable = gateRSS()
			g.rssAt = now
		}
		if g.rssReadable && pending > 0 {
			bound := g.process - g.process/10
			overRSS, underRSS = g.rss >= bound, g.rss < bound-bound/10
		}
	}
	switch {
	case overBudget || overHeap || overRSS:
		g.full = true
	case underBudget && underHeap && underRSS:
		g.full = false
	}
	if g.full && (!underRSS || !underHeap) && (g.releasedAt.IsZero() || now.Sub(g.releasedAt) >= releaseEvery || now.Before(g.releasedAt)) {
		gateRelease()
		g.releasedAt = now
		g.rssAt = time.Time{} // read what is left at the next update
	}
	return g.full
}

// shedOverBudget resolves a new intent whose tenant holds its budget: shed,
// with the error code tenant_budget, and without the fallback (the tenant is
// told to slow down, not given an answer).
func (e *engine) shedOverBudget(p *pending, nowMs int64, t *track) {
	e.m.tenantShed.Inc()
	e.log.Warn("intent shed: its tenant's pending intents hold their byte budget", "intent_id", p.id, "tenant", intents.TenantOf(p.tenant), "budget_bytes", e.budget.perTenant)
	e.resolve(p, schemas.OutcomeShed, nil, &schemas.ErrorInfo{
		Code:    CodeTenantBudget,
		Message: fmt.Sprintf("the tenant's pending intents hold %d bytes, its budget (router.max_pending_bytes_per_tenant): try again later", e.budget.tenants[intents.TenantOf(p.tenant)]),
	}, 0, nowMs, t)
}
