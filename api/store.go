package api

import (
	"container/heap"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// DefaultResultsMaxBytes is the byte budget [NewResults] gives the store
// unless [WithResultsMaxBytes] sets another.
const DefaultResultsMaxBytes = 128 << 20

// intentKey is an intent's identity: its tenant ("" for none: auth off, or a
// record without one) and its id. Two tenants that use one id have two
// intents, with two results.
type intentKey struct {
	tenant string
	id     string
}

// keyOf returns the identity of the intent a result answers.
func keyOf(res *schemas.IntentResult) intentKey { return intentKey{tenantOf(res), res.IntentID} }

// entry is one intent the store remembers: its result (nil until it comes)
// and where it was read, its last timeout event (nil if none), and, once a
// subscriber needed it, the result's JSON encoding.
type entry struct {
	key       intentKey
	res       *schemas.IntentResult
	body      []byte
	hasPos    bool
	partition int32
	offset    int64
	timeout   *schemas.IntentTimeout

	size   int64  // bytes counted against the budget
	seq    uint64 // arrival order, across tenants
	shelf  *shelf // nil once evicted
	newer  *entry // the next of its tenant's entries, in arrival order
	sameID *entry // the next entry with the same intent id (another tenant's)
}

// shelf is what the store holds for one tenant: its entries, oldest first,
// and their count and bytes.
type shelf struct {
	tenant       string
	oldest, last *entry
	n            int
	bytes        int64
	idx          int // in the store's heap
}

// store is the bounded memory of recent intents behind [Results]: at most
// maxEntries intents and maxBytes bytes (results, their encodings and
// timeout events, as estimated by sizeOf).
//
// Eviction is fair between tenants: over either bound, it evicts the oldest
// entry of the tenant holding the largest share, a tenant's share being the
// larger of its fraction of the entries and its fraction of the bytes (ties
// go to the tenant with the oldest entry). So a tenant's large or many
// results evict its own before anyone else's; a tenant never loses an
// intent to one that holds less than it does; with one tenant (or none:
// authentication off) it is plain oldest-first. The guarantee: of T tenants
// holding results, each keeps at least its last 1/T of the budget (or all
// it has, if less).
//
// Not safe for concurrent use: Results.mu guards it.
type store struct {
	maxEntries int
	maxBytes   int64

	byID    map[string]*entry // by intent id; other tenants' entries with that id chain through sameID
	tenants map[string]*shelf
	heap    shelfHeap // tenants by share, largest first
	n       int
	bytes   int64
	seq     uint64
}

func newStore(maxEntries int, maxBytes int64) *store {
	return &store{
		maxEntries: maxEntries,
		maxBytes:   maxBytes,
		byID:       make(map[string]*entry, min(maxEntries, 1<<16)),
		tenants:    map[string]*shelf{},
		heap:       shelfHeap{maxEntries: float64(maxEntries), maxBytes: float64(maxBytes)},
	}
}

// get returns the entry of an intent, or nil.
func (st *store) get(k intentKey) *entry {
	for e := st.byID[k.id]; e != nil; e = e.sameID {
		if e.key.tenant == k.tenant {
			return e
		}
	}
	return nil
}

// anyTenant returns an entry with the intent id, whatever its tenant (for
// callers without one: authentication off): the tenant-less one if there is
// one, else the first remembered. want filters the entries considered.
func (st *store) anyTenant(id string, want func(*entry) bool) *entry {
	var first *entry
	for e := st.byID[id]; e != nil; e = e.sameID {
		if !want(e) {
			continue
		}
		if e.key.tenant == "" {
			return e
		}
		if first == nil || e.seq < first.seq {
			first = e
		}
	}
	return first
}

// getOrAdd returns the entry of an intent, adding an empty one (evicting as
// needed) if there is none.
func (st *store) getOrAdd(k intentKey) *entry {
	if e := st.get(k); e != nil {
		return e
	}
	sh := st.tenants[k.tenant]
	if sh == nil {
		sh = &shelf{tenant: k.tenant}
		st.tenants[k.tenant] = sh
		heap.Push(&st.heap, sh)
	}
	st.seq++
	e := &entry{key: k, seq: st.seq, shelf: sh, size: entryOverhead + int64(len(k.id)+len(k.tenant))}
	e.sameID = st.byID[k.id]
	st.byID[k.id] = e
	if sh.last == nil {
		sh.oldest = e
	} else {
		sh.last.newer = e
	}
	sh.last = e
	sh.n++
	st.n++
	sh.bytes += e.size
	st.bytes += e.size
	heap.Fix(&st.heap, sh.idx)
	st.evict()
	return e
}

// grow counts delta more bytes for e (its result, encoding or timeout event
// came), evicting as needed. Nothing is counted for an evicted entry.
func (st *store) grow(e *entry, delta int64) {
	sh := e.shelf
	if sh == nil || delta == 0 {
		return
	}
	e.size += delta
	sh.bytes += delta
	st.bytes += delta
	heap.Fix(&st.heap, sh.idx)
	st.evict()
}

// evict drops entries, by the fair rule, until the store is within its
// bounds.
func (st *store) evict() {
	for st.n > st.maxEntries || st.bytes > st.maxBytes {
		st.remove(st.heap.shelves[0].oldest)
	}
}

// remove drops e, the oldest entry of its tenant.
func (st *store) remove(e *entry) {
	sh := e.shelf
	sh.oldest = e.newer
	if sh.oldest == nil {
		sh.last = nil
	}
	sh.n--
	st.n--
	sh.bytes -= e.size
	st.bytes -= e.size
	e.shelf, e.newer = nil, nil
	if sh.n == 0 {
		heap.Remove(&st.heap, sh.idx)
		delete(st.tenants, sh.tenant)
	} else {
		heap.Fix(&st.heap, sh.idx)
	}
	if head := st.byID[e.key.id]; head == e {
		if e.sameID == nil {
			delete(st.byID, e.key.id)
		} else {
			st.byID[e.key.id] = e.sameID
		}
	} else {
		for p := head; p != nil; p = p.sameID {
			if p.sameID == e {
				p.sameID = e.sameID
				break
			}
		}
	}
	e.sameID = nil
}

// entryOverhead estimates what an entry costs beyond its strings: the
// entry, the result and its timeline, the map slot.
const entryOverhead = 512

// sizeOfResult estimates the bytes a result holds.
func sizeOfResult(res *schemas.IntentResult) int64 {
	n := len(res.IntentID) + len(res.IntentType) + len(res.Agent) + len(res.Outcome) +
		len(deref(res.SessionID)) + len(deref(res.Tenant))
	if res.Answer != nil {
		n += len(*res.Answer)
	}
	if res.Error != nil {
		n += len(res.Error.Code) + len(res.Error.Message)
	}
	return int64(n)
}

// sizeOfTimeout estimates the bytes a timeout event holds.
func sizeOfTimeout(t *schemas.IntentTimeout) int64 {
	return int64(128 + len(t.IntentID) + len(t.IntentType) + len(t.Agent) + len(t.Reason) + len(t.Fallback) +
		len(deref(t.SessionID)) + len(deref(t.Tenant)))
}

// encoded returns e's result as JSON, encoding it on first use (one encoding
// however many subscribers receive it), and counts the encoding in st.
func (st *store) encoded(e *entry) []byte {
	if e.body == nil {
		b, err := marshal(e.res)
		if err != nil {
			return nil
		}
		e.body = b
		st.grow(e, int64(len(b)))
	}
	return e.body
}

// shelfHeap orders tenants by share, the largest on top.
type shelfHeap struct {
	shelves              []*shelf
	maxEntries, maxBytes float64
}

func (h *shelfHeap) share(sh *shelf) float64 {
	return max(float64(sh.n)/h.maxEntries, float64(sh.bytes)/h.maxBytes)
}

func (h *shelfHeap) Len() int { return len(h.shelves) }

func (h *shelfHeap) Less(i, j int) bool {
	a, b := h.shelves[i], h.shelves[j]
	if sa, sb := h.share(a), h.share(b); sa != sb {
		return sa > sb
	}
	return a.oldest != nil && (b.oldest == nil || a.oldest.seq < b.oldest.seq)
}

func (h *shelfHeap) Swap(i, j int) {
	h.shelves[i], h.shelves[j] = h.shelves[j], h.shelves[i]
	h.shelves[i].idx, h.shelves[j].idx = i, j
}

func (h *shelfHeap) Push(x any) {
	sh := x.(*shelf)
	sh.idx = len(h.shelves)
	h.shelves = append(h.shelves, sh)
}

func (h *shelfHeap) Pop() any {
	n := len(h.shelves) - 1
	sh := h.shelves[n]
	h.shelves[n] = nil
	h.shelves = h.shelves[:n]
	return sh
}
