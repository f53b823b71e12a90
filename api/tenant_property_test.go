package api_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// TestTwoTenantsRandomOperations drives two tenants' random operations on
// a small pool of shared intent ids (submit with an explicit id, GET,
// DELETE, ?wait of a stored result, stream subscriptions by id, session and
// type), with a stand-in router that writes exactly one result (or a
// timeout event, then the result) per (tenant, id) it was sent, in random
// order, and checks after every step that no tenant ever observes or
// changes another's intents: every answer and every stream message is the
// caller's tenant's, and holds what the stand-in router wrote for that
// (tenant, id).
func TestTwoTenantsRandomOperations(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { twoTenants(t, seed) })
	}
}

func twoTenants(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 13))
	h := newHarness(t, withAuth(nil), withCapacity(16), withConfig(func(c *api.Config) {
		c.MessageBurst = 1 << 20 // the fake clock never refills the bucket
	}))
	tenants := []string{"acme", "globex"}
	keys := map[string]string{"acme": keyAcme, "globex": keyGlobex}
	ids := []string{"X", "Y", "Z", "W"}

	type key struct{ tenant, id string }
	written := map[key]*schemas.IntentResult{} // what the stand-in router wrote
	submitted := map[key]bool{}
	var pending []key // submitted, not yet answered by the stand-in router

	// One stream connection per tenant, subscribed to everything it can
	// name: all ids, the shared session and type.
	conns := map[string]*wsClient{}
	for _, tn := range tenants {
		conn, _, body := h.tryDial("", bearer(keys[tn]))
		if conn == nil {
			t.Fatalf("dial: %s", body)
		}
		c := &wsClient{t: t, conn: conn}
		c.subscribe(`{"session_id":"shared","intent_type":"echo"}`)
		conns[tn] = c
	}

	checkResult := func(tn, id string, res *schemas.IntentResult, where string) {
		t.Helper()
		if res.Tenant == nil || *res.Tenant != tn {
			t.Fatalf("%s: tenant %s got a result of tenant %v for %s", where, tn, res.Tenant, id)
		}
		want := written[key{tn, id}]
		if want == nil || res.Outcome != want.Outcome || *res.Answer != *want.Answer {
			t.Fatalf("%s: tenant %s got %+v for %s, but its result is %+v", where, tn, res, id, want)
		}
	}

	for step := range 300 {
		tn := tenants[rng.IntN(2)]
		id := ids[rng.IntN(len(ids))]
		hdr := bearer(keys[tn])
		switch op := rng.IntN(6); op {
		case 0: // submit with an explicit id
			body := `{"intent_id":"` + id + `","intent_type":"echo","session_id":"shared","payload":{"by":"` + tn + `"}}`
			resp, b := h.doWith("POST", "/v1/intents", body, hdr)
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("step %d: submit: %d %s", step, resp.StatusCode, b)
			}
			if k := (key{tn, id}); !submitted[k] && written[k] == nil {
				submitted[k] = true
				pending = append(pending, k)
			}
		case 1: // the stand-in router answers a pending intent, once
			if len(pending) == 0 {
				continue
			}
			i := rng.IntN(len(pending))
			k := pending[i]
			pending = append(pending[:i], pending[i+1:]...)
			if rng.IntN(3) == 0 {
				h.results.AddTimeout(0, int64(step), &schemas.IntentTimeout{
					IntentID: k.id, IntentType: "echo", Agent: "agent-a", Reason: schemas.ReasonDeadline,
					Fallback: schemas.FallbackNone, Tenant: schemas.Ptr(k.tenant), SessionID: schemas.Ptr("shared"),
				})
			}
			res := tenantResult(k.id, k.tenant, "shared")
			res.Answer = schemas.Ptr(schemas.JSON(`{"for":"` + k.tenant + `/` + k.id + `","step":` + fmt.Sprint(step) + `}`))
			if rng.IntN(2) == 0 {
				res.Outcome = schemas.OutcomeRejected
			}
			written[k] = res
			h.results.Add(res)
		case 2: // GET
			resp, b := h.doWith("GET", "/v1/intents/"+id, "", hdr)
			switch resp.StatusCode {
			case http.StatusNotFound:
			case http.StatusOK:
				var v struct {
					schemas.IntentResult
					Status  string                 `json:"status"`
					Timeout *schemas.IntentTimeout `json:"timeout"`
				}
				if err := json.Unmarshal(b, &v); err != nil {
					t.Fatal(err)
				}
				if v.Timeout != nil && (v.Timeout.Tenant == nil || *v.Timeout.Tenant != tn) {
					t.Fatalf("step %d: %s's GET %s shows another tenant's timeout event: %s", step, tn, id, b)
				}
				if v.Status == "resolved" {
					checkResult(tn, id, &v.IntentResult, fmt.Sprintf("step %d GET", step))
				} else if !submitted[key{tn, id}] {
					t.Fatalf("step %d: %s's GET %s is pending, but %s never submitted it: %s", step, tn, id, tn, b)
				}
			default:
				t.Fatalf("step %d: GET: %d %s", step, resp.StatusCode, b)
			}
		case 3: // DELETE
			resp, b := h.doWith("DELETE", "/v1/intents/"+id, "", hdr)
			own := written[key{tn, id}]
			switch {
			case resp.StatusCode == http.StatusConflict && own == nil:
				t.Fatalf("step %d: %s's DELETE %s says resolved, but its intent has no result: %s", step, tn, id, b)
			case resp.StatusCode == http.StatusAccepted && own != nil:
				t.Fatalf("step %d: %s's DELETE %s was accepted, but its intent has resolved", step, tn, id)
			case resp.StatusCode == http.StatusConflict && !strings.Contains(string(b), string(own.Outcome)):
				t.Fatalf("step %d: %s's DELETE %s names another outcome: %s", step, tn, id, b)
			case resp.StatusCode == http.StatusAccepted:
				cs := h.pub.Cancels()
				if last := cs[len(cs)-1]; last.Tenant != tn || last.IntentID != id {
					t.Fatalf("step %d: %s's DELETE %s published %+v", step, tn, id, last)
				}
			}
		case 4: // ?wait of what is stored: answered at once with the caller's own, or never
			if written[key{tn, id}] == nil {
				continue
			}
			body := `{"intent_id":"` + id + `","intent_type":"echo","session_id":"shared","payload":{"by":"` + tn + `"}}`
			resp, b := h.doWith("POST", "/v1/intents?wait=1s", body, hdr)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("step %d: %s's ?wait of its resolved %s: %d %s", step, tn, id, resp.StatusCode, b)
			}
			var res schemas.IntentResult
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatal(err)
			}
			checkResult(tn, id, &res, fmt.Sprintf("step %d ?wait", step))
		case 5: // subscribe by id: the stored result, if any, comes on the stream
			conns[tn].sendText(`{"subscribe":{"intent_ids":["` + id + `"]}}`)
		}
		// Every stream message so far is the tenant's own, and holds what
		// the stand-in router wrote.
		for _, ctn := range tenants {
			conns[ctn].readToBarrier(step, func(m serverMsg) {
				switch {
				case m.Result != nil:
					checkResult(ctn, m.Result.IntentID, m.Result, fmt.Sprintf("step %d stream", step))
				case m.Timeout != nil && (m.Timeout.Tenant == nil || *m.Timeout.Tenant != ctn):
					t.Fatalf("step %d: %s's stream got another tenant's timeout event %+v", step, ctn, m.Timeout)
				case m.Type == "error":
					t.Fatalf("step %d: %s's stream got error %+v", step, ctn, m.Error)
				}
			})
		}
	}
}

// readToBarrier sends a barrier subscription and passes every message
// that arrives before its acknowledgement to check.
func (c *wsClient) readToBarrier(step int, check func(serverMsg)) {
	c.t.Helper()
	id := fmt.Sprintf("barrier-%d", step)
	c.sendText(`{"subscribe":{"intent_ids":["` + id + `"]}}`)
	for {
		m := c.read()
		if m.Type == "subscribed" && strings.Contains(string(m.Subscription), id) {
			break
		}
		check(m)
	}
	c.sendText(`{"unsubscribe":{"intent_ids":["` + id + `"]}}`)
	for {
		m := c.read()
		if m.Type == "unsubscribed" {
			return
		}
		check(m)
	}
}
