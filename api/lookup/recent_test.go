package lookup_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// With authentication off (api.AnyTenant) Recent lists every tenant's
// intents, tenant-less ones among them, newest first across tenants, as
// Lookup finds every tenant's and memory's Recent lists them: pages of
// limit, each cursor going on where the last page stopped.
func TestRecentOfAnyTenantListsEveryTenantsNewestFirst(t *testing.T) {
	e := newEnv(t)
	e.putResult(0, result("", "n1", schemas.OutcomeAnswered, 1000))
	e.putResult(1, result("acme", "a1", schemas.OutcomeAnswered, 1001))
	e.putResult(2, result("globex", "g1", schemas.OutcomeAnswered, 1002))
	e.putResult(0, result("acme", "a2", schemas.OutcomeAnswered, 1003))
	e.putResult(1, result("", "n2", schemas.OutcomeAnswered, 1004))
	e.putResult(2, result("globex", "g2", schemas.OutcomeAnswered, 1004)) // same time: by tenant, then id, descending
	e.putResult(2, result("globex", "g3", schemas.OutcomeAnswered, 1004))
	e.putPending(0, pending("acme", "ap", 1005, 9000))
	e.putResult(1, result("acme", "same", schemas.OutcomeAnswered, 1000)) // one id, two tenants
	e.putResult(2, result("globex", "same", schemas.OutcomeAnswered, 999))
	e.ready()

	want := []string{"acme/ap", "globex/g3", "globex/g2", "/n2", "acme/a2", "globex/g1", "acme/a1", "acme/same", "/n1", "globex/same"}
	for _, limit := range []int{1, 3, 4, 10, 50} {
		var got []string
		before := ""
		for page := 0; ; page++ {
			list, next, err := e.store.Recent(context.Background(), api.AnyTenant, limit, before)
			if err != nil {
				t.Fatalf("limit %d, page %d: %v", limit, page, err)
			}
			if len(list) > limit {
				t.Fatalf("limit %d, page %d: %d intents", limit, page, len(list))
			}
			for _, st := range list {
				got = append(got, st.Tenant+"/"+st.IntentID)
				if (st.IntentID == "ap") != (st.Pending != nil) || (st.IntentID != "ap") != st.Resolved() {
					t.Fatalf("limit %d: %s/%s listed as %+v", limit, st.Tenant, st.IntentID, st)
				}
			}
			if next == "" {
				break
			}
			if page > len(want) {
				t.Fatalf("limit %d: no end of pages: %v", limit, got)
			}
			before = next
		}
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: every tenant's recent intents:\n got %v\nwant %v", limit, got, want)
		}
	}

	if _, _, err := e.store.Recent(context.Background(), api.AnyTenant, 10, "!!"); !errors.Is(err, api.ErrInvalidCursor) {
		t.Fatalf("bad cursor: %v", err)
	}
}

// A tenant's pages list every intent of its list, also when a page ends
// one intent before the list's end (the cursor was once given only when
// two or more were left).
func TestRecentOfATenantPagesToTheEnd(t *testing.T) {
	e := newEnv(t)
	e.putResult(0, result("acme", "a1", schemas.OutcomeAnswered, 1001))
	e.putResult(1, result("globex", "g1", schemas.OutcomeAnswered, 1002))
	e.putResult(0, result("acme", "a2", schemas.OutcomeAnswered, 1003))
	e.putPending(0, pending("acme", "ap", 1005, 9000))
	e.putResult(1, result("acme", "same", schemas.OutcomeAnswered, 1000))
	e.ready()
	for _, limit := range []int{1, 3, 4, 10} {
		var got []string
		before := ""
		for page := 0; page <= 4; page++ {
			list, next, err := e.store.Recent(context.Background(), "acme", limit, before)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ids(list)...)
			if before = next; next == "" {
				break
			}
		}
		if fmt.Sprint(got) != "[ap a2 a1 same]" {
			t.Fatalf("limit %d: acme's recent intents: %v", limit, got)
		}
	}
}

func ids(list []api.IntentStatus) []string {
	out := make([]string, 0, len(list))
	for _, st := range list {
		out = append(out, st.IntentID)
	}
	return out
}
