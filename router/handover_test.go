package router_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/port"
)

// A planned revocation under at_least_once (a member joins or leaves the
// group) waits for the outputs in flight: what they complete is stored
// before the partitions go, and an acknowledged result's resolution marker
// is written before them, so that the partitions' next owner neither pairs
// the response again nor times the intent out again (a second result).

// revokeWaits pushes the revocation of partition 0 and reports whether the
// loop waits in it for outputs (on a timer of the router's clock besides
// its ticker) within two seconds.
func (h *harness) revokeWaits(lost bool) bool {
	h.t.Helper()
	if lost {
		h.src.LoseAssignment()
	}
	h.src.Push(port.Revoked{{Topic: requests}, {Topic: responses}})
	ctx, cancel := context.WithTimeout(h.ctx, 2*time.Second)
	defer cancel()
	return h.clock.BlockUntilContext(ctx, 2) == nil
}

// A response's result in flight at the revocation: its offset (and its
// request's) is stored before the partitions go.
func TestAtLeastOnceRevokeWaitsForAResultInFlight(t *testing.T) {
	h := start(t, testConfig, config.AtLeastOnce)
	reqTP, respTP := port.TopicPartition{Topic: requests}, port.TopicPartition{Topic: responses}
	h.request("h-1", "echo", `{}`)
	h.wait(echoTopic, 1)
	h.sink.Hold()
	t.Cleanup(h.sink.Release)
	h.answer("h-1", "echo", `{}`)
	h.result(1)
	h.settle()
	wantReq, wantResp := h.offset[requests], h.offset[responses]
	waits := h.revokeWaits(false)
	if waits {
		if got := h.src.Stored(respTP); got != -1 {
			t.Fatalf("responses offset %d stored before the result was acknowledged", got)
		}
		h.sink.Release() // the broker acknowledges while the revocation waits
	}
	h.settleRevoked()
	if got := h.src.Stored(respTP); got != wantResp {
		t.Fatalf("responses offset %d stored by the end of the revocation, want %d (the answer's result and marker acknowledged during it; waited: %v)", got, wantResp, waits)
	}
	if got := h.src.Stored(reqTP); got != wantReq {
		t.Fatalf("requests offset %d stored by the end of the revocation, want %d (waited: %v)", got, wantReq, waits)
	}
	h.waitMarker("h-1")
}

// A timer's result in flight at the revocation (it counts against no
// record): its resolution marker is written before the partitions go, so
// that the next owner's restore finds the intent resolved.
func TestAtLeastOnceRevokeWaitsForATimersResult(t *testing.T) {
	h := start(t, testConfig, config.AtLeastOnce)
	h.request("f-1", "fraud_check", `{"amount":1}`)
	h.wait(slowTopic, 1)
	h.advance(5 * time.Millisecond) // commit_interval: the state is written
	h.waitState(nil, "f-1")
	h.settle()
	h.sink.Hold()
	t.Cleanup(h.sink.Release)
	h.advance(300 * time.Millisecond) // the deadline
	h.result(1)                       // its timeout event, then its marker, follow its acknowledgement
	h.settle()
	waits := h.revokeWaits(false)
	if waits {
		h.sink.Release()
	}
	h.settleRevoked()
	if !h.markerWritten("f-1") {
		t.Fatalf("the revocation ended before the timed-out intent's resolution marker was written (waited: %v)", waits)
	}
	h.timeoutEvent(1)
}

// markerWritten reports whether id's resolution marker has been produced.
func (h *harness) markerWritten(id string) bool {
	h.t.Helper()
	for _, o := range h.sink.Outputs(pendingT) {
		if h.resolvedMarker(o, id) {
			return true
		}
	}
	return false
}

// The wait is bounded: outputs not acknowledged within it are left, and
// their records are read again by the partitions' next owner.
func TestAtLeastOnceRevokeWaitIsBounded(t *testing.T) {
	h := start(t, testConfig, config.AtLeastOnce)
	respTP := port.TopicPartition{Topic: responses}
	h.request("b-1", "echo", `{}`)
	h.wait(echoTopic, 1)
	h.sink.Hold()
	t.Cleanup(h.sink.Release)
	h.answer("b-1", "echo", `{}`)
	h.result(1)
	h.settle()
	if !h.revokeWaits(false) {
		t.Fatal("the revocation did not wait for the result in flight")
	}
	h.advance(5 * time.Second)
	h.settleRevoked()
	h.sink.Release()
	h.settleRevoked()
	if got := h.src.Stored(respTP); got != -1 {
		t.Fatalf("responses offset %d stored after the revocation gave up waiting, want none", got)
	}
}

// A lost assignment does not wait: another member may own the partitions
// already.
func TestAtLeastOnceLostRevokeDoesNotWait(t *testing.T) {
	h := start(t, testConfig, config.AtLeastOnce)
	respTP := port.TopicPartition{Topic: responses}
	h.request("l-1", "echo", `{}`)
	h.wait(echoTopic, 1)
	h.sink.Hold()
	t.Cleanup(h.sink.Release)
	h.answer("l-1", "echo", `{}`)
	h.result(1)
	h.settle()
	if h.revokeWaits(true) {
		t.Fatal("a lost revocation waited for the outputs in flight")
	}
	h.settleRevoked()
	if got := h.src.Stored(respTP); got != -1 {
		t.Fatalf("responses offset %d stored for a lost partition", got)
	}
}

// An intent still pending at a planned revocation whose state waits to be
// written (commit_interval has not passed): the revocation writes it, so
// its request's offset is stored and the partition's next owner restores
// the intent, waiting for the answer to its dispatch, instead of reading
// the request again and dispatching it a second time.
func TestAtLeastOnceRevokeWritesWaitingStates(t *testing.T) {
	h := start(t, testConfig, config.AtLeastOnce)
	reqTP := port.TopicPartition{Topic: requests}
	h.request("w-1", "fraud_check", `{"amount":1}`)
	h.wait(slowTopic, 1)
	h.settle()
	if n := h.sink.Count(pendingT); n != 0 {
		t.Fatalf("%d pending-changelog records before commit_interval, want the state still waiting", n)
	}
	wantReq := h.offset[requests]
	h.src.Push(port.Revoked{{Topic: requests}, {Topic: responses}})
	h.settleRevoked()
	h.waitState(nil, "w-1")
	if got := h.src.Stored(reqTP); got != wantReq {
		t.Fatalf("requests offset %d stored by the end of the revocation, want %d (the pending intent's state written and acknowledged during it)", got, wantReq)
	}
}
