package lookup

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/switchboard-mcp/switchboard/api"
)

// Recent implements [api.IntentLookup]: tenant's intents by the time the
// router received them, newest first. AnyTenant (authentication off, where
// every intent is visible, as Lookup finds any tenant's) lists every
// tenant's, tenant-less ones among them, merged newest first (at one time,
// by tenant, then id, descending). limit is capped at MaxRecent (at most
// DefaultRecent if < 1). An intent whose result expired since it was
// listed is skipped.
//
// Each tenant's list is in time order in the store; every tenant's is a
// merge of them: one seek per tenant to start, then one per intent listed
// (tasks/list without authentication, where tenants are few).
func (s *Store) Recent(ctx context.Context, tenant string, limit int, before string) ([]api.IntentStatus, string, error) {
	switch {
	case limit < 1:
		limit = DefaultRecent
	case limit > MaxRecent:
		limit = MaxRecent
	}
	all := tenant == api.AnyTenant
	var after *recentEntry // the cursor: list what comes after it
	if before != "" {
		c, err := base64.RawURLEncoding.DecodeString(before)
		var ok bool
		if all {
			after, ok = parseCursorOfAll(c)
		} else {
			after, ok = &recentEntry{tenant: tenant}, len(c) >= 8
			if ok {
				after.received, after.id = binary.BigEndian.Uint64(c), string(c[8:])
			}
		}
		if err != nil || !ok {
			return nil, "", fmt.Errorf("%w: %q", api.ErrInvalidCursor, before)
		}
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxRecent}, UpperBound: []byte{pfxRecent + 1}})
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrRead, err)
	}
	defer func() { _ = it.Close() }()
	tenants := []string{tenant}
	if all {
		tenants = tenantsListed(it)
	}
	var heads recentHeap
	for _, t := range tenants {
		if e, ok := newestBefore(it, t, after.boundIn(t)); ok {
			heads = append(heads, e)
		}
	}
	heap.Init(&heads)
	var out []api.IntentStatus
	var last recentEntry
	for len(heads) > 0 && len(out) < limit {
		if err := ctx.Err(); err != nil {
			return nil, "", err
		}
		e := heap.Pop(&heads).(recentEntry)
		if next, ok := newestBefore(it, e.tenant, e.key()); ok {
			heap.Push(&heads, next)
		}
		last = e
		st, err := s.Lookup(ctx, e.tenant, e.id)
		if errors.Is(err, api.ErrIntentNotFound) || errors.Is(err, api.ErrLookupCatchingUp) {
			continue // its result expired meanwhile
		}
		if err != nil {
			return nil, "", err
		}
		out = append(out, st)
	}
	if err := it.Error(); err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrRead, err)
	}
	next := ""
	if len(out) == limit && len(heads) > 0 {
		next = base64.RawURLEncoding.EncodeToString(last.cursor(all))
	}
	return out, next, nil
}

// Page sizes of Recent.
const (
	DefaultRecent = 50
	MaxRecent     = 1000
)

// recentEntry is one intent in its tenant's list.
type recentEntry struct {
	received uint64 // as the key orders it
	tenant   string
	id       string
}

func (e recentEntry) key() []byte { return recentKey(e.tenant, int64(e.received), e.id) }

// newer orders entries as Recent lists them.
func (e recentEntry) newer(o recentEntry) bool {
	if c := cmp.Compare(e.received, o.received); c != 0 {
		return c > 0
	}
	if e.tenant != o.tenant {
		return e.tenant > o.tenant
	}
	return e.id > o.id
}

// cursor encodes e as a page's cursor: its time and id in its tenant's
// list; its tenant too in every tenant's.
func (e recentEntry) cursor(all bool) []byte {
	b := binary.BigEndian.AppendUint64(nil, e.received)
	if all {
		b = binary.AppendUvarint(b, uint64(len(e.tenant)))
		b = append(b, e.tenant...)
	}
	return append(b, e.id...)
}

func parseCursorOfAll(c []byte) (*recentEntry, bool) {
	if len(c) < 9 {
		return nil, false
	}
	n, w := binary.Uvarint(c[8:])
	if w <= 0 || uint64(len(c)-8-w) < n {
		return nil, false
	}
	rest := c[8+w:]
	return &recentEntry{received: binary.BigEndian.Uint64(c), tenant: string(rest[:n]), id: string(rest[n:])}, true
}

// boundIn returns the key in tenant's list that the entries listed after
// e come before (nil e: the whole list).
func (e *recentEntry) boundIn(tenant string) []byte {
	switch {
	case e == nil:
		return prefixEnd(recentPrefix(tenant))
	case tenant == e.tenant:
		return e.key()
	case tenant < e.tenant: // its entries of e's time come after e
		return prefixEnd(binary.BigEndian.AppendUint64(recentPrefix(tenant), e.received))
	}
	return binary.BigEndian.AppendUint64(recentPrefix(tenant), e.received)
}

// newestBefore returns the newest entry of tenant's list before key.
func newestBefore(it *pebble.Iterator, tenant string, key []byte) (recentEntry, bool) {
	p := recentPrefix(tenant)
	if !it.SeekLT(key) || !bytes.HasPrefix(it.Key(), p) || len(it.Key()) < len(p)+8 {
		return recentEntry{}, false
	}
	k := it.Key()[len(p):]
	return recentEntry{received: binary.BigEndian.Uint64(k), tenant: tenant, id: string(k[8:])}, true
}

// tenantsListed returns every tenant with a list, skipping from one to the
// next (one seek per tenant).
func tenantsListed(it *pebble.Iterator) []string {
	var out []string
	for ok := it.First(); ok; {
		k := it.Key()
		n, w := binary.Uvarint(k[1:])
		if w <= 0 || uint64(len(k)-1-w) < n {
			ok = it.Next()
			continue
		}
		t := string(k[1+w : 1+w+int(n)])
		out = append(out, t)
		ok = it.SeekGE(prefixEnd(recentPrefix(t)))
	}
	return out
}

// recentHeap holds each tenant's newest entry not yet listed, the newest
// on top.
type recentHeap []recentEntry

func (h recentHeap) Len() int           { return len(h) }
func (h recentHeap) Less(i, j int) bool { return h[i].newer(h[j]) }
func (h recentHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *recentHeap) Push(x any)        { *h = append(*h, x.(recentEntry)) }
func (h *recentHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
