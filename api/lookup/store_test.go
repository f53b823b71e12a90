package lookup_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/lookup"
	"github.com/switchboard-mcp/switchboard/api/lookup/lookuptest"
	"github.com/switchboard-mcp/switchboard/schemas"
)

const (
	topicResults  = "results"
	topicTimeouts = "timeouts"
	topicPending  = "pending"
	topicProgress = "progress"
	testTimeout   = 10 * time.Second
)

// env is a store in a temporary directory, materialised from an in-memory
// source by a Materializer that start runs and stop stops.
type env struct {
	t     *testing.T
	dir   string
	src   *lookuptest.Source
	codec *schemas.Codec
	clock *clockwork.FakeClock
	live  *recordingLive

	store  *lookup.Store
	m      *lookup.Materializer
	cancel context.CancelFunc
	done   chan error
}

func newEnv(t *testing.T) *env {
	t.Helper()
	codec, err := schemas.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dir: t.TempDir(), src: lookuptest.NewSource(), codec: codec, clock: clockwork.NewFakeClock()}
	e.src.CreateTopic(topicResults, "id-results", 3)
	e.src.CreateTopic(topicTimeouts, "id-timeouts", 3)
	e.src.CreateTopic(topicPending, "id-pending", 3)
	e.src.CreateTopic(topicProgress, "id-progress", 3)
	t.Cleanup(e.stop)
	return e
}

func (e *env) start() {
	e.t.Helper()
	var err error
	e.store, err = lookup.Open(e.dir, lookup.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		e.t.Fatal(err)
	}
	e.live = &recordingLive{}
	e.m, err = lookup.NewMaterializer(lookup.Config{
		Results: topicResults, Timeouts: topicTimeouts, Pending: topicPending, Progress: topicProgress,
		Store: e.store, Source: e.src, Codec: e.codec, Live: e.live,
		Clock: e.clock, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done = cancel, make(chan error, 1)
	go func() { e.done <- e.m.Run(ctx) }()
}

// ready starts the materializer and waits until the store has caught up.
func (e *env) ready() {
	e.t.Helper()
	e.start()
	e.waitFor("the store to catch up", func() bool { return e.m.Ready() == nil })
}

func (e *env) stop() {
	if e.cancel == nil {
		return
	}
	e.cancel()
	if err := <-e.done; err != nil {
		e.t.Errorf("Run: %v", err)
	}
	if err := e.store.Close(); err != nil {
		e.t.Errorf("Close: %v", err)
	}
	e.cancel = nil
}

// waitFor waits for cond, failing the test after testTimeout.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			e.t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

func (e *env) encode(topic string, v schemas.Record) []byte {
	e.t.Helper()
	b, err := e.codec.Encode(topic, v)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func result(tenant, id string, outcome schemas.Outcome, received int64) *schemas.IntentResult {
	r := &schemas.IntentResult{
		IntentID: id, IntentType: "echo", Agent: "echo", Outcome: outcome, Attempts: 1,
		Timeline: schemas.Timeline{ReceivedAt: received, DispatchedAt: schemas.Ptr(received + 1), ResolvedAt: received + 5, Deadline: received + 1000},
	}
	if tenant != "" {
		r.Tenant = &tenant
	}
	if outcome == schemas.OutcomeAnswered {
		b, _ := json.Marshal(map[string]string{"id": id})
		r.Answer = schemas.Ptr(schemas.JSON(b))
		r.Timeline.AnsweredAt = schemas.Ptr(received + 4)
	}
	return r
}

func (e *env) putResult(p int32, r *schemas.IntentResult) int64 {
	return e.src.Append(topicResults, p, []byte(r.IntentID), e.encode(topicResults, r))
}

func (e *env) putTimeout(p int32, tenant, id string, deadline int64) int64 {
	t := &schemas.IntentTimeout{
		IntentID: id, IntentType: "echo", Agent: "echo", Deadline: deadline, TimedOutAt: deadline + 2,
		ElapsedMs: 1000, Reason: schemas.ReasonDeadline, Fallback: schemas.FallbackStatic,
	}
	if tenant != "" {
		t.Tenant = &tenant
	}
	return e.src.Append(topicTimeouts, p, []byte(id), e.encode(topicTimeouts, t))
}

func (e *env) putProgress(p int32, id string, seq int64) int64 {
	pr := &schemas.IntentProgress{IntentID: id, IntentType: "echo", Agent: "echo", Sequence: seq, Attempt: 1, ReceivedAt: 100 + seq}
	return e.src.Append(topicProgress, p, []byte(id), e.encode(topicProgress, pr))
}

// putPending writes a changelog record keyed as the router keys it: the
// bare id without a tenant, tenant + "\x1f" + id with one.
func (e *env) putPending(p int32, pi *schemas.PendingIntent) {
	e.src.Append(topicPending, p, changelogKey(pi), e.encode(topicPending, pi))
}

func changelogKey(pi *schemas.PendingIntent) []byte {
	if pi.Tenant == nil || *pi.Tenant == "" {
		return []byte(pi.IntentID)
	}
	return []byte(*pi.Tenant + "\x1f" + pi.IntentID)
}

func pending(tenant, id string, received, deadline int64) *schemas.PendingIntent {
	pi := &schemas.PendingIntent{
		IntentID: id, IntentType: "echo", Agent: "echo", RecordTs: received, ReceivedAt: received,
		DispatchedAt: received + 1, Deadline: deadline, Attempt: 1, Payload: "{}",
	}
	if tenant != "" {
		pi.Tenant = &tenant
	}
	return pi
}

func (e *env) lookup(tenant, id string) (api.IntentStatus, error) {
	return e.store.Lookup(context.Background(), tenant, id)
}

// found waits until tenant's intent id is found in state (a resolved
// outcome, or a pending state) and returns it.
func (e *env) found(tenant, id, want string) api.IntentStatus {
	e.t.Helper()
	var st api.IntentStatus
	e.waitFor(fmt.Sprintf("%q/%q to be %s", tenant, id, want), func() bool {
		var err error
		st, err = e.lookup(tenant, id)
		return err == nil && stateOf(st) == want
	})
	return st
}

func stateOf(st api.IntentStatus) string {
	switch {
	case st.Result != nil:
		return string(st.Result.Outcome)
	case st.Pending != nil:
		return st.Pending.State
	}
	return "?"
}

func (e *env) notFound(tenant, id string) {
	e.t.Helper()
	if st, err := e.lookup(tenant, id); !errors.Is(err, api.ErrIntentNotFound) {
		e.t.Fatalf("lookup %q/%q: %+v, %v; want ErrIntentNotFound", tenant, id, st, err)
	}
}

// recordingLive records what the Materializer hands to the live stream.
type recordingLive struct {
	mu       sync.Mutex
	begin    *api.Position
	results  []int64 // offsets, partition 0 only
	timeouts int
	progress []string // "id/sequence@offset"
}

func (l *recordingLive) Begin(pos api.Position) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.begin = &pos
}

func (l *recordingLive) Result(partition int32, offset int64, _ *schemas.IntentResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if partition == 0 {
		l.results = append(l.results, offset)
	}
}

func (l *recordingLive) Timeout(int32, int64, *schemas.IntentTimeout) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timeouts++
}

func (l *recordingLive) Progress(_ int32, offset int64, p *schemas.IntentProgress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.progress = append(l.progress, fmt.Sprintf("%s/%d@%d", p.IntentID, p.Sequence, offset))
}

func (l *recordingLive) progressSeen() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.progress)
}

func TestMaterializesResultsTimeoutsAndPendingStates(t *testing.T) {
	e := newEnv(t)
	e.putResult(0, result("", "a", schemas.OutcomeAnswered, 100))
	e.putTimeout(1, "", "b", 1100)
	e.putResult(1, result("", "b", schemas.OutcomeFallbackStatic, 101))
	e.putPending(2, pending("", "c", 102, 5000))
	queued := pending("acme", "d", 103, 6000)
	queued.Queued = schemas.Ptr(true)
	e.putPending(0, queued)
	e.ready()

	a := e.found("", "a", "answered")
	if a.Result.Answer == nil || string(*a.Result.Answer) != `{"id":"a"}` || *a.Result.Timeline.AnsweredAt != 104 || a.Pending != nil {
		t.Fatalf("a: %+v", a.Result)
	}
	b := e.found("", "b", "fallback_static")
	if b.Timeout == nil || b.Timeout.Deadline != 1100 || b.Timeout.Reason != schemas.ReasonDeadline {
		t.Fatalf("b's timeout event: %+v", b.Timeout)
	}
	c := e.found("", "c", api.PendingDispatched)
	if c.Pending.Deadline != 5000 || c.Pending.Agent != "echo" || c.Pending.DispatchedAt != 103 || c.Pending.ReceivedAt != 102 {
		t.Fatalf("c's pending state: %+v", c.Pending)
	}
	d := e.found("acme", "d", api.PendingQueued)
	if d.Pending.Deadline != 6000 || d.Pending.DispatchedAt != 0 {
		t.Fatalf("d's pending state: %+v", d.Pending)
	}

	// c resolves: the changelog's resolved record first (the result is on
	// its way), then the result, then the tombstone.
	res := pending("", "c", 102, 5000)
	res.ResolvedAt, res.Outcome = schemas.Ptr(int64(200)), schemas.Ptr("answered")
	e.putPending(2, res)
	if st := e.found("", "c", api.PendingResolving); st.Pending.Outcome != "answered" {
		t.Fatalf("resolving: %+v", st.Pending)
	}
	e.putResult(2, result("", "c", schemas.OutcomeAnswered, 102))
	e.found("", "c", "answered")
	e.src.Append(topicPending, 2, []byte("c"), nil)
	e.found("", "c", "answered")

	// d's tombstone (its composite key) forgets it: found by the value's
	// (tenant, id), forgotten by the key.
	e.src.Append(topicPending, 0, changelogKey(queued), nil)
	e.waitFor("d to be forgotten", func() bool {
		_, err := e.lookup("acme", "d")
		return errors.Is(err, api.ErrIntentNotFound)
	})
	e.notFound("", "unknown")
}

func TestTenantsAreSeparate(t *testing.T) {
	e := newEnv(t)
	// The same id in two tenants and none; tenant and id bytes that could
	// run together ("ab"+"c" and "a"+"bc").
	e.putResult(0, result("", "x", schemas.OutcomeAnswered, 1))
	e.putResult(1, result("acme", "x", schemas.OutcomeTimedOut, 2))
	e.putResult(2, result("globex", "x", schemas.OutcomeCancelled, 3))
	e.putResult(0, result("ab", "c", schemas.OutcomeAnswered, 4))
	e.putResult(0, result("a", "bc", schemas.OutcomeTimedOut, 5))
	e.ready()

	for tenant, want := range map[string]string{"": "answered", "acme": "timed_out", "globex": "cancelled"} {
		if st := e.found(tenant, "x", want); st.Tenant != tenant {
			t.Fatalf("tenant %q: %+v", tenant, st)
		}
	}
	e.notFound("initech", "x")
	e.notFound("ab", "bc")
	e.notFound("a", "c")
	e.found("ab", "c", "answered")
	e.found("a", "bc", "timed_out")
	// Authentication off: every tenant's, the tenant-less one first.
	if st, err := e.lookup(api.AnyTenant, "x"); err != nil || st.Tenant != "" {
		t.Fatalf("any tenant: %+v %v", st, err)
	}
	if st, err := e.lookup(api.AnyTenant, "c"); err != nil || st.Tenant != "ab" {
		t.Fatalf("any tenant of c: %+v %v", st, err)
	}
	list, _, err := e.store.Recent(context.Background(), "acme", 10, "")
	if err != nil || len(list) != 1 || list[0].IntentID != "x" || list[0].Tenant != "acme" {
		t.Fatalf("acme's recent: %+v %v", list, err)
	}
}

func TestIDsOfAnyBytesAndLength(t *testing.T) {
	e := newEnv(t)
	ids := []string{"\x00", "日本語", strings.Repeat("z", 100_000), "a\x1fb", "é/?#%"}
	for i, id := range ids {
		e.putResult(int32(i%3), result("t", id, schemas.OutcomeAnswered, int64(i)))
	}
	e.ready()
	for _, id := range ids {
		e.found("t", id, "answered")
		e.notFound("", id)
		e.notFound("t", id+"\x00")
	}
	e.notFound("t", "")
	e.notFound("t", strings.Repeat("z", 99_999))
}

func TestResumesFromItsPositionsAfterARestart(t *testing.T) {
	e := newEnv(t)
	for i := range 30 {
		e.putResult(int32(i%3), result("", fmt.Sprintf("before-%d", i), schemas.OutcomeAnswered, int64(i)))
	}
	e.ready()
	e.found("", "before-29", "answered")
	e.stop()

	for i := range 6 {
		e.putResult(int32(i%3), result("", fmt.Sprintf("after-%d", i), schemas.OutcomeAnswered, int64(100+i)))
	}
	delivered := e.src.Delivered()
	e.ready()
	for i := range 6 {
		e.found("", fmt.Sprintf("after-%d", i), "answered")
	}
	e.found("", "before-0", "answered")
	if got := e.src.LastRead()[topicResults]; got[0] != 10 || got[1] != 10 || got[2] != 10 {
		t.Fatalf("the second run started reading results at %v, not where the first stopped (10 each)", got)
	}
	if n := e.src.Delivered() - delivered; n != 6 {
		t.Fatalf("the restart read %d records, want only the 6 new ones", n)
	}
	// Live begins at the end seen at the start: the records read to catch
	// up are not handed to the live stream.
	if b := e.live.begin; b == nil || b.Results[0] != 12 {
		t.Fatalf("Live began at %+v, want results partition 0 at 12", e.live.begin)
	}
	e.putResult(0, result("", "live", schemas.OutcomeAnswered, 200))
	e.found("", "live", "answered")
	e.live.mu.Lock()
	defer e.live.mu.Unlock()
	if len(e.live.results) != 1 || e.live.results[0] != 12 {
		t.Fatalf("live results of partition 0: %v, want [12]", e.live.results)
	}
}

func TestAMissWhileCatchingUpIsNotANotFound(t *testing.T) {
	e := newEnv(t)
	store, err := lookup.Open(e.dir, lookup.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	if _, err := store.Lookup(context.Background(), "", "x"); !errors.Is(err, api.ErrLookupCatchingUp) {
		t.Fatalf("before the materializer caught up: %v, want ErrLookupCatchingUp", err)
	}
}

func TestExpiresWhatTheTopicNoLongerKeeps(t *testing.T) {
	e := newEnv(t)
	for i := range 10 {
		id := fmt.Sprintf("i%d", i)
		e.putTimeout(0, "acme", id, int64(i))
		e.putResult(0, result("acme", id, schemas.OutcomeTimedOut, int64(i)))
	}
	e.ready()
	e.found("acme", "i9", "timed_out")
	// Retention deleted offsets 0-5 of both topics (i0-i5); a redelivery
	// of i2's result survives at offset 10.
	e.putResult(0, result("acme", "i2", schemas.OutcomeTimedOut, 2))
	e.found("acme", "i2", "timed_out")
	if n, err := e.store.Expire(lookup.KindResults, []int64{6, 0, 0}); err != nil || n != 6 {
		t.Fatalf("Expire results: %d, %v; want 6", n, err)
	}
	if n, err := e.store.Expire(lookup.KindTimeouts, []int64{6, 0, 0}); err != nil || n != 6 {
		t.Fatalf("Expire timeouts: %d, %v; want 6", n, err)
	}
	for _, id := range []string{"i0", "i1", "i3", "i4", "i5"} {
		e.notFound("acme", id)
	}
	if st := e.found("acme", "i2", "timed_out"); st.Timeout != nil {
		t.Fatalf("i2's timeout event outlived its record: %+v", st.Timeout)
	}
	if st := e.found("acme", "i6", "timed_out"); st.Timeout == nil {
		t.Fatal("i6 lost its timeout event")
	}
	list, _, err := e.store.Recent(context.Background(), "acme", 100, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, st := range list {
		got = append(got, st.IntentID)
	}
	if want := "i9 i8 i7 i6 i2"; strings.Join(got, " ") != want {
		t.Fatalf("recent after expiry: %v, want %s", got, want)
	}
	// Expiring again finds nothing left.
	if n, err := e.store.Expire(lookup.KindResults, []int64{6, 0, 0}); err != nil || n != 0 {
		t.Fatalf("second Expire: %d, %v", n, err)
	}
}

func TestTheMaterializerExpiresOnItsClock(t *testing.T) {
	e := newEnv(t)
	for i := range 4 {
		e.putResult(1, result("", fmt.Sprintf("e%d", i), schemas.OutcomeAnswered, int64(i)))
	}
	e.ready()
	e.found("", "e0", "answered")
	e.src.SetLow(topicResults, 1, 2)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := e.clock.BlockUntilContext(ctx, 1); err != nil { // the expiry loop waits for its next round
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	e.waitFor("e0 and e1 to expire", func() bool {
		_, err0 := e.lookup("", "e0")
		_, err1 := e.lookup("", "e1")
		return errors.Is(err0, api.ErrIntentNotFound) && errors.Is(err1, api.ErrIntentNotFound)
	})
	e.found("", "e2", "answered")
}

func TestRecentPagesNewestFirst(t *testing.T) {
	e := newEnv(t)
	for i := range 25 {
		e.putResult(int32(i%3), result("acme", fmt.Sprintf("r%02d", i), schemas.OutcomeAnswered, int64(1000+i)))
	}
	e.putPending(0, pending("acme", "p", 2000, 9000))
	e.putResult(0, result("globex", "g", schemas.OutcomeAnswered, 3000))
	e.ready()
	var got []string
	before := ""
	for page := 0; ; page++ {
		list, next, err := e.store.Recent(context.Background(), "acme", 10, before)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range list {
			got = append(got, st.IntentID)
		}
		if next == "" {
			break
		}
		if page > 5 {
			t.Fatal("no end of pages")
		}
		before = next
	}
	if len(got) != 26 || got[0] != "p" || got[1] != "r24" || got[25] != "r00" {
		t.Fatalf("acme's recent intents: %v", got)
	}
	if _, _, err := e.store.Recent(context.Background(), "acme", 10, "!!"); !errors.Is(err, api.ErrInvalidCursor) {
		t.Fatalf("bad cursor: %v", err)
	}
}

func TestALostStoreIsRebuilt(t *testing.T) {
	e := newEnv(t)
	for i := range 9 {
		e.putResult(int32(i%3), result("", fmt.Sprintf("l%d", i), schemas.OutcomeAnswered, int64(i)))
	}
	e.ready()
	e.found("", "l8", "answered")
	e.stop()
	if err := os.RemoveAll(e.dir); err != nil {
		t.Fatal(err)
	}
	e.ready()
	for i := range 9 {
		e.found("", fmt.Sprintf("l%d", i), "answered")
	}
	if got := e.src.LastRead()[topicResults]; got[0] != lookup.FromStart {
		t.Fatalf("a lost store read from %v, not from the start", got)
	}
}

func TestACorruptStoreIsRebuilt(t *testing.T) {
	e := newEnv(t)
	e.putResult(0, result("", "k", schemas.OutcomeAnswered, 1))
	e.ready()
	e.found("", "k", "answered")
	if err := e.store.Flush(); err != nil {
		t.Fatal(err)
	}
	e.stop()
	manifests, _ := filepath.Glob(filepath.Join(e.dir, "MANIFEST-*"))
	if len(manifests) == 0 {
		t.Fatal("no MANIFEST to corrupt")
	}
	for _, m := range manifests {
		if err := os.WriteFile(m, []byte("not a manifest, not at all"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e.ready()
	e.found("", "k", "answered")
	if got := e.src.LastRead()[topicResults]; got[0] != lookup.FromStart {
		t.Fatalf("a corrupt store read from %v, not from the start", got)
	}
}

func TestARecreatedTopicEmptiesTheStore(t *testing.T) {
	for _, c := range []struct {
		name string
		id   string // the new topic's id; "" when the cluster does not tell
	}{{"new topic id", "id-results-2"}, {"offsets before the store's", ""}} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			for i := range 6 {
				e.putResult(int32(i%3), result("", fmt.Sprintf("old%d", i), schemas.OutcomeAnswered, int64(i)))
			}
			e.ready()
			e.found("", "old5", "answered")
			e.stop()
			e.src.CreateTopic(topicResults, c.id, 3)
			if c.id == "" {
				// A cluster without topic ids: recognised by an end
				// before the offsets the store read.
				e.src.CreateTopic(topicResults, "id-results", 3)
			}
			e.putResult(0, result("", "new", schemas.OutcomeAnswered, 10))
			e.ready()
			e.found("", "new", "answered")
			e.notFound("", "old1")
			e.notFound("", "old3")
		})
	}
}

func TestAStoreInUseIsRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := lookup.Open(dir, lookup.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if _, err := lookup.Open(dir, lookup.WithLogger(slog.New(slog.DiscardHandler))); !errors.Is(err, lookup.ErrOpen) {
		t.Fatalf("a second Open of the same directory: %v, want ErrOpen", err)
	}
}

// The progress topic is not stored: the Materializer hands what comes
// after its end at the start to Live (the one reader of an instance), never
// what came before, and a restart starts at its end again.
func TestProgressIsHandedToLiveFromItsEndOnly(t *testing.T) {
	e := newEnv(t)
	e.putProgress(0, "old", 1)
	e.putResult(0, result("", "old", schemas.OutcomeAnswered, 100))
	e.ready()
	e.putProgress(0, "new", 1)
	e.putProgress(0, "new", 2)
	e.putResult(0, result("", "new", schemas.OutcomeAnswered, 101))
	e.found("", "new", "answered")
	e.waitFor("the live progress", func() bool { return len(e.live.progressSeen()) == 2 })
	if got := e.live.progressSeen(); !slices.Equal(got, []string{"new/1@1", "new/2@2"}) {
		t.Fatalf("live progress: %v, want new/1@1 and new/2@2 only", got)
	}
	if b := e.live.begin; b == nil || len(b.Progress) != 3 || b.Progress[0] != 1 {
		t.Fatalf("Live began at %+v, want progress partition 0 at 1", e.live.begin)
	}
	e.stop()
	e.putProgress(0, "later", 1)
	e.ready()
	e.putProgress(0, "live", 1)
	e.waitFor("the live progress", func() bool { return len(e.live.progressSeen()) == 1 })
	if got := e.live.progressSeen(); got[0] != "live/1@4" {
		t.Fatalf("after a restart, live progress: %v, want live/1@4 only", got)
	}
}
