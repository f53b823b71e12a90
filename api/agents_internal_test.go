package api

import (
	"fmt"
	"testing"
)

// TestInFlightCapIsPerTenant: one tenant's intents in flight stop being
// tracked at maxInflightPerTenant; another tenant's still are.
func TestInFlightCapIsPerTenant(t *testing.T) {
	r := NewResults(0)
	for i := range maxInflightPerTenant + 1 {
		r.submitted(intentKey{"acme", fmt.Sprintf("a-%d", i)}, "echo")
	}
	r.submitted(intentKey{"globex", "g-1"}, "echo")
	acme := r.snapshot(&principal{tenant: "acme"}, false)["echo"].InFlight
	globex := r.snapshot(&principal{tenant: "globex"}, false)["echo"].InFlight
	if acme != maxInflightPerTenant || globex != 1 {
		t.Fatalf("in flight: acme %d, globex %d; want %d and 1", acme, globex, maxInflightPerTenant)
	}
}
