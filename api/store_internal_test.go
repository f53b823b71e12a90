package api

import (
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/schemas"
)

func answered(tenant, id string, answerBytes int) *schemas.IntentResult {
	r := &schemas.IntentResult{IntentID: id, IntentType: "echo", Agent: "a", Outcome: schemas.OutcomeAnswered}
	if tenant != "" {
		r.Tenant = schemas.Ptr(tenant)
	}
	if answerBytes > 0 {
		r.Answer = schemas.Ptr(schemas.JSON(`"` + strings.Repeat("x", answerBytes-2) + `"`))
	}
	return r
}

// checkStore verifies the store's books: counts and bytes per tenant and in
// all agree with the entries, and every entry is found by its key.
func checkStore(t *testing.T, st *store) {
	t.Helper()
	var n int
	var bytes int64
	for name, sh := range st.tenants {
		var sn int
		var sb int64
		for e := sh.oldest; e != nil; e = e.newer {
			if st.get(e.key) != e || e.key.tenant != name {
				t.Fatalf("entry %+v is not found by its key", e.key)
			}
			sn++
			sb += e.size
		}
		if sn != sh.n || sb != sh.bytes {
			t.Fatalf("tenant %q: books say %d entries %d bytes, entries are %d, %d", name, sh.n, sh.bytes, sn, sb)
		}
		n += sn
		bytes += sb
	}
	if n != st.n || bytes != st.bytes {
		t.Fatalf("books say %d entries %d bytes, entries are %d, %d", st.n, st.bytes, n, bytes)
	}
	if st.n > st.maxEntries || st.bytes > st.maxBytes {
		t.Fatalf("over budget: %d entries, %d bytes", st.n, st.bytes)
	}
}

// Finding 5: the store is bounded by bytes, not only by count: 1,000
// results of 100 KB each in a 1 MiB budget leave at most 1 MiB.
func TestResultsStoreIsBoundedByBytes(t *testing.T) {
	r := NewResults(100_000, WithResultsMaxBytes(1<<20))
	for i := range 1000 {
		r.Add(answered("", fmt.Sprintf("big-%d", i), 100_000))
	}
	checkStore(t, r.st)
	if r.st.bytes > 1<<20 || r.st.n > 10 {
		t.Fatalf("holds %d results, %d bytes; the budget is 1 MiB", r.st.n, r.st.bytes)
	}
	if _, ok := r.Get("", "big-999"); !ok {
		t.Fatal("the newest result was evicted")
	}
	if _, ok := r.Get("", "big-0"); ok {
		t.Fatal("the oldest result was kept")
	}
}

// One tenant's large answers evict its own results, not another tenant's
// smaller holding.
func TestResultsStoreEvictsTheLargestTenantFirst(t *testing.T) {
	r := NewResults(100_000, WithResultsMaxBytes(1<<20))
	for i := range 20 {
		r.Add(answered("acme", fmt.Sprintf("a-%d", i), 1000))
	}
	for i := range 200 {
		r.Add(answered("globex", fmt.Sprintf("g-%d", i), 100_000))
	}
	checkStore(t, r.st)
	for i := range 20 {
		if _, ok := r.Get("acme", fmt.Sprintf("a-%d", i)); !ok {
			t.Fatalf("acme's a-%d was evicted by globex's large answers", i)
		}
	}
	if _, ok := r.Get("globex", "g-199"); !ok {
		t.Fatal("globex's newest was evicted")
	}
}

// By count too: a tenant flooding small results evicts its own.
func TestResultsStoreEvictsTheTenantWithTheMostResults(t *testing.T) {
	r := NewResults(100)
	for i := range 10 {
		r.Add(answered("acme", fmt.Sprintf("a-%d", i), 0))
	}
	for i := range 1000 {
		r.Add(answered("globex", fmt.Sprintf("g-%d", i), 0))
	}
	checkStore(t, r.st)
	for i := range 10 {
		if _, ok := r.Get("acme", fmt.Sprintf("a-%d", i)); !ok {
			t.Fatalf("acme's a-%d was evicted by globex's flood", i)
		}
	}
	if r.st.tenants["globex"].n != 90 {
		t.Fatalf("globex holds %d, want the other 90", r.st.tenants["globex"].n)
	}
	// Once globex holds less than acme, acme's oldest go first.
	for i := 10; i < 100; i++ {
		r.Add(answered("acme", fmt.Sprintf("a-%d", i), 0))
	}
	checkStore(t, r.st)
	if a, g := r.st.tenants["acme"].n, r.st.tenants["globex"].n; a != 50 || g != 50 {
		t.Fatalf("acme holds %d, globex %d; want 50 each", a, g)
	}
}

// Two tenants' entries for one id are kept apart, and evicting one leaves
// the other found.
func TestResultsStoreSameIDAcrossTenants(t *testing.T) {
	r := NewResults(3)
	r.Add(answered("acme", "X", 0))
	r.Add(answered("globex", "X", 0))
	r.Add(answered("", "X", 0))
	checkStore(t, r.st)
	for _, tenant := range []string{"acme", "globex", ""} {
		if res, ok := r.Get(tenant, "X"); !ok || tenantOf(res) != tenant {
			t.Fatalf("Get(%q, X) = %v, %v", tenant, res, ok)
		}
	}
	if e := r.st.anyTenant("X", hasResult); e == nil || e.key.tenant != "" {
		t.Fatalf("anyTenant(X) = %+v, want the tenant-less one", e)
	}
	r.Add(answered("initech", "Y", 0)) // evicts acme's X, the oldest
	checkStore(t, r.st)
	if _, ok := r.Get("acme", "X"); ok {
		t.Fatal("acme's X was not evicted")
	}
	for _, tenant := range []string{"globex", ""} {
		if _, ok := r.Get(tenant, "X"); !ok {
			t.Fatalf("%q's X was lost with acme's", tenant)
		}
	}
	if res, _ := r.Get("globex", "X"); tenantOf(res) != "globex" {
		t.Fatalf("globex's X is %+v", res)
	}
}

// A timeout event and the result of one intent share one entry; the result
// that follows does not take a second place.
func TestResultsStoreKeepsTimeoutAndResultTogether(t *testing.T) {
	r := NewResults(2)
	r.AddTimeout(0, 0, &schemas.IntentTimeout{IntentID: "a", IntentType: "echo", Tenant: schemas.Ptr("acme")})
	r.Add(answered("acme", "a", 0))
	r.Add(answered("acme", "b", 0))
	checkStore(t, r.st)
	if r.st.n != 2 {
		t.Fatalf("holds %d entries, want 2", r.st.n)
	}
	res, to, _ := r.lookup(schemas.Ptr("acme"), "a")
	if res == nil || to == nil {
		t.Fatalf("lookup(a) = %v, %v; want both", res, to)
	}
}

// The encoding a subscriber needed counts against the budget.
func TestResultsStoreCountsEncodings(t *testing.T) {
	r := NewResults(10)
	r.Add(answered("", "a", 10_000))
	before := r.st.bytes
	r.mu.Lock()
	r.st.encoded(r.st.get(intentKey{"", "a"}))
	r.mu.Unlock()
	if grew := r.st.bytes - before; grew < 10_000 {
		t.Fatalf("the encoding added %d bytes, want over 10,000", grew)
	}
	checkStore(t, r.st)
}
