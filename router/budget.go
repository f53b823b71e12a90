package router

import (
	"fmt"
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

// byteGate is the poll goroutine's pause for router.max_pending_bytes: full
// once what the pending intents hold plus what is on its way to the loop
// reaches max, until it is below 90% of max (hysteresis).
type byteGate struct {
	max  int64 // 0: no bound
	full bool
}

// update reports whether the requests partitions stay paused, held being
// the pending bytes plus the bytes queued for the loop.
func (g *byteGate) update(held int64) bool {
	switch {
	case g.max <= 0:
		g.full = false
	case held >= g.max:
		g.full = true
	case held < g.max-g.max/10:
		g.full = false
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
