package api

import (
	"context"
	"fmt"
	"testing"

	"github.com/jonboulle/clockwork"
)

// One tenant's flood of Idempotency-Keys forgets its own oldest keys, not
// another tenant's: the other's retry is still recognised.
func TestIdempotencyKeysAreCappedPerTenant(t *testing.T) {
	m := newIdempotency(clockwork.NewFakeClock(), 0)
	claim := func(tenant, key string) bool { // reports whether key was new
		_, finish, err := m.claim(context.Background(), tenant, tenant+"\x00"+key, "id-"+key, false, [32]byte{})
		if err != nil {
			t.Fatal(err)
		}
		if finish != nil {
			finish(true)
		}
		return finish != nil
	}
	claim("acme", "order-1")
	for i := range maxIdempotencyKeysPerTenant + 500 {
		claim("globex", fmt.Sprintf("k-%d", i))
	}
	if claim("acme", "order-1") {
		t.Fatal("globex's keys pushed out acme's")
	}
	if !claim("globex", "k-0") {
		t.Fatal("globex's oldest key was kept past its tenant's cap")
	}
	if n := m.perTenant["globex"].n; n != maxIdempotencyKeysPerTenant {
		t.Fatalf("globex holds %d keys, want %d", n, maxIdempotencyKeysPerTenant)
	}
	if len(m.keys) != maxIdempotencyKeysPerTenant+1 {
		t.Fatalf("%d keys remembered", len(m.keys))
	}
}
