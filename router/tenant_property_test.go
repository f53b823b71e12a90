package router_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// Two tenants (and records without one) play random operations against the
// real router on ids they share: requests valid or not (an unknown type, an
// unknown target agent, bytes that do not decode), duplicates, cancels of
// their own and each other's ids, answers that name the right tenant, the
// wrong one, none, or come from the wrong agent, and time passing (timeouts,
// late answers). Whatever the sequence, at the end:
//
//   - every (tenant, id) that was requested has exactly one result, and
//     nothing else has one;
//   - it was dispatched once if its first request was valid, else never, and
//     its result is rejected exactly when that first request was not valid
//     (another tenant's earlier use of the id changes nothing);
//   - an answered result carries an answer meant for its tenant (or one
//     that named none), never another tenant's, never the wrong agent's;
//   - a cancelled result was cancelled by its own tenant.
func TestRandomTenantsKeepExactlyOneResultEach(t *testing.T) {
	both(t, func(t *testing.T, delivery string) {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { playTenants(t, delivery, seed, 120) })
		}
	})
}

// intentRef is (tenant, id), tenant "" for none.
type intentRef struct{ tenant, id string }

// tenantModel is what the test knows of one (tenant, id).
type tenantModel struct {
	firstValid bool // its first request was a valid one
	cancelled  bool // its own tenant sent a cancel for it
}

func playTenants(t *testing.T, delivery string, seed uint64, ops int) {
	rng := rand.New(rand.NewPCG(seed, 13))
	h := start(t, strings.Replace(testConfig, "max_pending: 3", "max_pending: 1000", 1), delivery)
	tenants := []string{"acme", "globex", ""}
	ids := []string{"x-0", "x-1", "x-2", "x-3"}
	model := map[intentRef]*tenantModel{}
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	var log []string // the operations, for a failure's message
	for range ops {
		ref := intentRef{pick(tenants), pick(ids)}
		switch op := rng.IntN(10); {
		case op < 4: // a request: valid, or not in one of three ways
			kind := rng.IntN(5)
			if _, seen := model[ref]; !seen {
				model[ref] = &tenantModel{firstValid: kind < 2 || (kind == 4 && ref.tenant != "")}
			}
			switch kind {
			case 0, 1:
				h.request(ref.id, "echo", `{}`, tenantOf(ref.tenant))
			case 2:
				h.request(ref.id, "nope", `{}`, tenantOf(ref.tenant))
			case 3:
				h.request(ref.id, "echo", `{}`, tenantOf(ref.tenant), func(r *schemas.IntentRequest) { r.TargetAgent = schemas.Ptr("ghost") })
			case 4:
				if ref.tenant == "" {
					// Bytes that do not decode: the key is all there is
					// to name an intent by, without a tenant.
					h.pushRaw(requests, ref.id, []byte("not a record"))
				} else {
					h.request(ref.id, "echo", `{}`, tenantOf(ref.tenant)) // a duplicate, if it was seen
				}
			}
			log = append(log, fmt.Sprintf("request %v kind %d", ref, kind))
		case op < 6: // a cancel, by the tenant or by another
			v := intents.Cancel{IntentID: ref.id, Reason: "r", Tenant: ref.tenant}
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			h.cancelRecord(ref.id, b)
			if m := model[ref]; m != nil {
				m.cancelled = true // its own tenant's cancel: may cancel it, if still pending
			}
			log = append(log, fmt.Sprintf("cancel %v", ref))
		case op < 9: // an answer: honest, for another tenant, naming none, or from the wrong agent
			agent, named := "echo", schemas.Ptr(ref.tenant)
			meantFor := ref.tenant
			switch rng.IntN(4) {
			case 1:
				other := pick(tenants)
				named, meantFor = schemas.Ptr(other), other
			case 2:
				named, meantFor = nil, "*"
			case 3:
				agent, meantFor = "slow", "wrong agent"
			}
			a := schemas.JSON(fmt.Sprintf(`{"for":%q}`, meantFor))
			h.push(responses, ref.id, &schemas.AgentResponse{RequestID: ref.id, Agent: agent, Status: schemas.StatusOK, Answer: &a, Tenant: named})
			log = append(log, fmt.Sprintf("answer %v from %s for %q", ref, agent, meantFor))
		default: // time passes, once the router has caught up
			settleMarked(h)
			h.advance(700 * time.Millisecond)
			log = append(log, "advance 700ms")
		}
	}
	// Let every intent still pending time out.
	for range 6 {
		settleMarked(h)
		h.advance(time.Second)
	}
	h.wait(results, len(model))
	settleMarked(h)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: %s\noperations:\n%s", seed, fmt.Sprintf(format, args...), strings.Join(log, "\n"))
	}
	got := map[intentRef][]*schemas.IntentResult{}
	for _, o := range h.sink.Outputs(results) {
		var res schemas.IntentResult
		if err := h.codec.Decode(o.Value, &res); err != nil {
			t.Fatal(err)
		}
		ref := intentRef{intents.TenantOf(res.Tenant), res.IntentID}
		got[ref] = append(got[ref], &res)
	}
	dispatched := map[intentRef]int{}
	for _, o := range h.sink.Outputs(echoTopic) {
		if len(o.Headers) > 0 && o.Headers[len(o.Headers)-1].Key == intents.HeaderControl {
			continue // a cancel notice
		}
		var ar schemas.AgentRequest
		if err := h.codec.Decode(o.Value, &ar); err != nil {
			t.Fatal(err)
		}
		dispatched[intentRef{intents.TenantOf(ar.Tenant), ar.IntentID}]++
	}
	for ref, rs := range got {
		if model[ref] == nil {
			fail("%v was never requested and has %d results", ref, len(rs))
		}
	}
	for ref, m := range model {
		rs := got[ref]
		if len(rs) != 1 {
			fail("%v has %d results, want 1", ref, len(rs))
		}
		res := rs[0]
		want := 0
		if m.firstValid {
			want = 1
		}
		if dispatched[ref] != want {
			fail("%v dispatched %d times, want %d (result %+v)", ref, dispatched[ref], want, res)
		}
		if (res.Outcome == schemas.OutcomeRejected) == m.firstValid {
			fail("%v: outcome %s, first request valid: %v", ref, res.Outcome, m.firstValid)
		}
		switch res.Outcome {
		case schemas.OutcomeAnswered:
			var a struct{ For string }
			if res.Answer == nil || json.Unmarshal([]byte(*res.Answer), &a) != nil || (a.For != ref.tenant && a.For != "*") {
				fail("%v answered with %v: not an answer meant for it", ref, res.Answer)
			}
		case schemas.OutcomeCancelled:
			if !m.cancelled {
				fail("%v cancelled, but its tenant never sent a cancel", ref)
			}
		case schemas.OutcomeRejected, schemas.OutcomeTimedOut:
		default:
			fail("%v: outcome %s", ref, res.Outcome)
		}
	}
}

// tenantOf sets a request's tenant; "" leaves it without one.
func tenantOf(tenant string) func(*schemas.IntentRequest) {
	return func(r *schemas.IntentRequest) {
		if tenant != "" {
			r.Tenant = &tenant
		}
	}
}

// settleMarked is settle when other records are being dead-lettered too: it
// waits for its own marker (a unique value) on the dead-letter topic, so
// everything pushed before it has been handled.
func settleMarked(h *harness) {
	h.t.Helper()
	h.marks++
	mark := fmt.Sprintf("marker %d", h.marks)
	h.pushRaw(requests, "", []byte(mark))
	for n := 1; ; n++ {
		if string(h.wait(dlq, n).Value) == mark {
			return
		}
	}
}
