//go:build integration && linux

package main

// Any instance answers for any intent (issue 17), on Apache Kafka: three
// 'switchboard serve' processes, each with its own lookup store; intents go
// in through instance 1; instances 2 and 3, which took none of them, answer
// for every one with the outcome and timeline of the results topic, and all
// three do again after each was restarted (resuming its store, not
// re-reading the topics); an intent no agent answers is pending, with its
// deadline, on every instance.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/intents/client"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

const lookupServeConfig = `kafka:
  bootstrap_servers: %[2]s
  group_id: %[1]s.router
` + shortTopics + `  partitions: 3
  auto_create: true
agents:
  echo: {topic: %[1]s.agent.echo, encoding: json}
  mute: {topic: %[1]s.agent.mute, encoding: json}
intents:
  echo: {agent: echo, timeout: 30s}
  late: {agent: mute, timeout: 200ms, fallback: {static: {decision: review}}}
  hold: {agent: mute, timeout: 10m}
http:
  listen: 127.0.0.1:0
  results: 1000
  lookup: {dir: %[3]s}
  auth: {mode: "off"}
`

// lookupIntents is how many intents the test makes (every 20th times out
// and falls back); SWITCHBOARD_LOOKUP_INTENTS overrides it. The first
// lookupViaAPI of them are POSTed to instance 1's API, as a front end
// would; the rest are published straight to the requests topic, as an
// agent or a back end would, which takes seconds where 100,000 POSTs from
// this race-instrumented client took about three minutes of CI.
const (
	lookupIntents = 100_000
	lookupViaAPI  = 10_000
)

func TestAnyInstanceAnswersForAnyIntentApacheKafka(t *testing.T) {
	bootstrap := kafkaBootstrap(t)
	total := lookupIntents
	if v, err := strconv.Atoi(os.Getenv("SWITCHBOARD_LOOKUP_INTENTS")); err == nil && v > 0 {
		total = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "switchboard")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	prefix := "lookup." + randomHex(4)
	nodes := make([]*lookupNode, 3)
	for i := range nodes {
		cfg := filepath.Join(dir, fmt.Sprintf("switchboard-%d.yaml", i+1))
		if err := os.WriteFile(cfg, fmt.Appendf(nil, lookupServeConfig, prefix, bootstrap, filepath.Join(dir, fmt.Sprintf("lookup-%d", i+1))), 0o600); err != nil {
			t.Fatal(err)
		}
		nodes[i] = &lookupNode{t: t, proc: &proc{
			name: fmt.Sprintf("serve-%d", i+1), bin: bin, logPath: filepath.Join(dir, fmt.Sprintf("serve-%d.log", i+1)),
			args: []string{"serve", "--config", cfg, "--insecure-no-auth", "--instance-id", fmt.Sprintf("lookup-%d", i+1)},
			env:  os.Environ(),
		}}
	}
	agent := &proc{
		name: "agent", bin: bin, logPath: filepath.Join(dir, "agent.log"), env: os.Environ(),
		args: []string{"agent", "--config", filepath.Join(dir, "switchboard-1.yaml"), "--name", "echo", "--concurrency", "256"},
	}
	defer func() {
		for _, n := range nodes {
			n.proc.stop(20 * time.Second)
		}
		agent.stop(10 * time.Second)
		if t.Failed() {
			for _, n := range nodes {
				t.Logf("%s log (tail):\n%s", n.proc.name, n.proc.tail(40))
			}
		}
	}()
	for _, n := range nodes {
		n.start(ctx)
	}
	if err := agent.start(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()

	// total intents (the first viaAPI through instance 1's API, the rest
	// straight to the requests topic), then one that no agent answers.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
	idOf := func(i int) string { return fmt.Sprintf("lk-%07d", i) }
	typeOf := func(i int) string {
		if i%20 == 0 {
			return "late"
		}
		return "echo"
	}
	viaAPI := min(total, lookupViaAPI)
	parallel(ctx, t, viaAPI, 64, func(i int) error {
		body := fmt.Sprintf(`{"intent_id":%q,"intent_type":%q,"payload":{"i":%d}}`, idOf(i), typeOf(i), i)
		code, b, err := httpDo(ctx, client, "POST", nodes[0].base+"/v1/intents", body)
		if err == nil && code != http.StatusAccepted {
			err = fmt.Errorf("POST %s: %d %s", idOf(i), code, b)
		}
		return err
	})
	t.Logf("%d intents POSTed to instance 1 in %s", viaAPI, time.Since(began).Round(time.Millisecond))
	publishIntents(ctx, t, bootstrap, prefix+".request", viaAPI, total, func(i int) *schemas.IntentRequest {
		return &schemas.IntentRequest{IntentID: idOf(i), IntentType: typeOf(i), Payload: schemas.JSON(fmt.Sprintf(`{"i":%d}`, i))}
	})
	holdSent := time.Now()
	if code, b, err := httpDo(ctx, client, "POST", nodes[0].base+"/v1/intents", `{"intent_id":"lk-hold","intent_type":"hold","payload":{}}`); err != nil || code != 202 {
		t.Fatalf("POST lk-hold: %d %s %v", code, b, err)
	}
	t.Logf("%d intents sent in %s", total+1, time.Since(began).Round(time.Millisecond))

	truth := readTopic(ctx, t, bootstrap, prefix+".result", total, func(r *schemas.IntentResult) string { return r.IntentID })
	late := 0
	for i := range total {
		if typeOf(i) == "late" {
			late++
		}
	}
	timeouts := readTopic(ctx, t, bootstrap, prefix+".timeout", late, func(r *schemas.IntentTimeout) string { return r.IntentID })
	t.Logf("all %d results in the results topic after %s", total, time.Since(began).Round(time.Millisecond))

	// The first check decodes every answer and compares it with the
	// topics; later ones compare the bytes with that checked answer (the
	// same data gives the same JSON), which keeps the race-instrumented
	// client's share of the test small.
	checked := make([][]byte, total)
	check := func(n *lookupNode) {
		t.Helper()
		start := time.Now()
		var bad atomic.Int64
		var first sync.Once
		parallel(ctx, t, total, 16, func(i int) error {
			if why := n.checkResolved(ctx, client, idOf(i), truth[idOf(i)], timeouts[idOf(i)], typeOf(i) == "late", &checked[i]); why != "" {
				bad.Add(1)
				first.Do(func() { t.Errorf("%s: %s", n.proc.name, why) })
			}
			return nil
		})
		if bad.Load() > 0 {
			t.Fatalf("%s: %d of %d intents wrong or missing", n.proc.name, bad.Load(), total)
		}
		n.checkPending(ctx, client, holdSent)
		n.checkTasks(idOf(1))
		t.Logf("%s answered for all %d intents and the pending one in %s", n.proc.name, total, time.Since(start).Round(time.Millisecond))
	}
	check(nodes[1])
	check(nodes[2])

	// Restart each (its store resumes: it re-reads only what came after
	// it stopped), then every one answers for every intent again.
	for _, n := range nodes {
		n.proc.stop(30 * time.Second)
		n.start(ctx)
		if read := n.recordsRead(); read >= int64(total) {
			t.Fatalf("%s read %d records to catch up after its restart: it replayed the topics instead of resuming", n.proc.name, read)
		}
	}
	for _, n := range nodes {
		check(n)
	}
}

// checkTasks reads a resolved intent and the pending one as MCP tasks
// (tasks/get, tasks/result): the MCP endpoint looks up through the same
// store.
func (n *lookupNode) checkTasks(resolved string) {
	n.t.Helper()
	m := &mcpInstance{t: n.t, url: n.base}
	sid := m.session()
	if r := m.call(sid, "tasks/get", resolved); !strings.Contains(r.body, `"status":"completed"`) {
		n.t.Fatalf("%s: MCP tasks/get %s: %s", n.proc.name, resolved, r.body)
	}
	if r := m.call(sid, "tasks/result", resolved); !strings.Contains(r.body, "related-task") || strings.Contains(r.body, `"isError":true`) {
		n.t.Fatalf("%s: MCP tasks/result %s: %s", n.proc.name, resolved, r.body)
	}
	if r := m.call(sid, "tasks/get", "lk-hold"); !strings.Contains(r.body, `"status":"working"`) {
		n.t.Fatalf("%s: MCP tasks/get lk-hold: %s", n.proc.name, r.body)
	}
}

// lookupNode is one serve process and its API's address.
type lookupNode struct {
	t    *testing.T
	proc *proc
	base string
}

var listeningRE = regexp.MustCompile(`msg="api listening" addr=(\S+)`)

// start starts the process and waits until its API is ready (its lookup
// store caught up).
func (n *lookupNode) start(ctx context.Context) {
	n.t.Helper()
	if err := n.proc.start(); err != nil {
		n.t.Fatal(err)
	}
	if err := n.proc.waitLog(ctx, 2*time.Minute, `msg="api listening"`); err != nil {
		n.t.Fatal(err)
	}
	m := listeningRE.FindStringSubmatch(n.proc.current())
	if m == nil {
		n.t.Fatalf("%s: no api address in its log", n.proc.name)
	}
	n.base = "http://" + m[1]
	if err := waitUntil(ctx, 2*time.Minute, 100*time.Millisecond, func() bool {
		code, _, err := httpDo(ctx, http.DefaultClient, "GET", n.base+"/readyz", "")
		return err == nil && code == 200
	}); err != nil {
		n.t.Fatalf("%s never got ready: %v", n.proc.name, err)
	}
}

var caughtUpRE = regexp.MustCompile(`msg="lookup store caught up".* records_read=(\d+)`)

// recordsRead returns how many records the current incarnation read
// before its store caught up.
func (n *lookupNode) recordsRead() int64 {
	m := caughtUpRE.FindStringSubmatch(n.proc.current())
	if m == nil {
		n.t.Fatalf("%s: no 'lookup store caught up' line in its log", n.proc.name)
	}
	v, _ := strconv.ParseInt(m[1], 10, 64)
	return v
}

type lookupView struct {
	schemas.IntentResult
	Status   string                 `json:"status"`
	State    string                 `json:"state"`
	Deadline int64                  `json:"deadline"`
	Timeout  *schemas.IntentTimeout `json:"timeout"`
	Events   []struct {
		Event string `json:"event"`
	} `json:"events"`
}

// checkResolved returns why the instance's answer for id differs from
// the records of the results and timeouts topics, "" when it does not.
// checked holds the answer once checked; a later answer equal to it is
// right without decoding.
func (n *lookupNode) checkResolved(ctx context.Context, client *http.Client, id string, want *schemas.IntentResult, wantTimeout *schemas.IntentTimeout, late bool, checked *[]byte) (why string) {
	if want == nil {
		return id + ": not in the results topic"
	}
	code, b, err := httpDo(ctx, client, "GET", n.base+"/v1/intents/"+id, "")
	if err != nil || code != 200 {
		return fmt.Sprintf("GET %s: %d %s %v", id, code, b, err)
	}
	if *checked != nil && string(*checked) == string(b) {
		return ""
	}
	defer func() {
		if why == "" && *checked == nil {
			*checked = b
		}
	}()
	var v lookupView
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Sprintf("GET %s: %v: %s", id, err, b)
	}
	got, _ := json.Marshal(v.IntentResult)
	exp, _ := json.Marshal(want)
	gotTO, _ := json.Marshal(v.Timeout)
	expTO, _ := json.Marshal(wantTimeout)
	switch {
	case v.Status != "resolved":
		return fmt.Sprintf("%s is %q: %s", id, v.Status, b)
	case string(got) != string(exp):
		return fmt.Sprintf("%s: answered %s, the results topic holds %s", id, got, exp)
	case string(gotTO) != string(expTO):
		return fmt.Sprintf("%s: timeout event %s, the timeouts topic holds %s", id, gotTO, expTO)
	case late && (want.Outcome != schemas.OutcomeFallbackStatic || wantTimeout == nil):
		return fmt.Sprintf("%s should have timed out: outcome %s, timeout event %s", id, want.Outcome, expTO)
	case !late && want.Outcome != schemas.OutcomeAnswered:
		return fmt.Sprintf("%s: outcome %s, want answered", id, want.Outcome)
	}
	var events []string
	for _, e := range v.Events {
		events = append(events, e.Event)
	}
	wantEvents := []string{"received"}
	if want.Timeline.DispatchedAt != nil {
		wantEvents = append(wantEvents, "dispatched")
	}
	if want.Timeline.AnsweredAt != nil {
		wantEvents = append(wantEvents, "answered")
	}
	if wantTimeout != nil {
		wantEvents = append(wantEvents, "timed_out")
	}
	wantEvents = append(wantEvents, "resolved")
	if strings.Join(events, ",") != strings.Join(wantEvents, ",") {
		return fmt.Sprintf("%s: timeline %v, want %v", id, events, wantEvents)
	}
	return ""
}

// checkPending checks that the intent no agent answers is pending on the
// instance, dispatched, with its deadline (10 minutes after it was sent).
func (n *lookupNode) checkPending(ctx context.Context, client *http.Client, sent time.Time) {
	n.t.Helper()
	var v lookupView
	if err := waitUntil(ctx, 30*time.Second, 50*time.Millisecond, func() bool {
		code, b, err := httpDo(ctx, client, "GET", n.base+"/v1/intents/lk-hold", "")
		v = lookupView{}
		return err == nil && code == 200 && json.Unmarshal(b, &v) == nil && v.State == "dispatched"
	}); err != nil {
		n.t.Fatalf("%s: lk-hold is not reported dispatched: %+v", n.proc.name, v)
	}
	want := sent.Add(10 * time.Minute).UnixMilli()
	if v.Status != "pending" || v.Agent != "mute" || v.Deadline < want-60_000 || v.Deadline > want+60_000 {
		n.t.Fatalf("%s: lk-hold: %+v, want pending on agent mute with a deadline near %d", n.proc.name, v, want)
	}
}

// readTopic reads a topic of intent records until it holds total of them
// and returns them by intent id.
func readTopic[T any](ctx context.Context, t *testing.T, bootstrap, topic string, total int, idOf func(*T) string) map[string]*T {
	t.Helper()
	codec, err := schemas.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	s := kafkaio.Settings{Bootstrap: bootstrap, ClientID: "lookup-test"}
	st, err := kafkaio.DescribeTopic(ctx, s, topic)
	if err != nil {
		t.Fatal(err)
	}
	from := make([]int64, len(st.High))
	for p := range from {
		from[p] = -1
	}
	out := map[string]*T{}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	err = kafkaio.Read(rctx, s, kafkaio.Reading{From: kafkaio.FromOffsetsOrEarliest(kafkaio.Offsets{topic: from})},
		func(r *port.Record) error {
			v := new(T)
			if err := codec.Decode(r.Value, any(v).(schemas.Record)); err != nil {
				return err
			}
			out[idOf(v)] = v
			if len(out) >= total {
				cancel()
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < total {
		t.Fatalf("%s holds %d records, want %d", topic, len(out), total)
	}
	return out
}

// parallel runs f(0..n-1) on workers goroutines and fails the test on the
// first error.
// publishIntents publishes intents [from, to) to topic as a client of the
// requests topic does (intents/client: keyed by id, acknowledged by the
// broker), 256 at a time.
func publishIntents(ctx context.Context, t *testing.T, bootstrap, topic string, from, to int, intent func(i int) *schemas.IntentRequest) {
	t.Helper()
	if from >= to {
		return
	}
	codec, err := schemas.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := client.NewPublisher(kafkaio.Settings{Bootstrap: bootstrap, ClientID: "lookup-test"}, codec, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	start := time.Now()
	parallel(ctx, t, to-from, 256, func(i int) error { return pub.Publish(ctx, intent(from+i)) })
	t.Logf("%d intents published to %s in %s", to-from, topic, time.Since(start).Round(time.Millisecond))
}

func parallel(ctx context.Context, t *testing.T, n, workers int, f func(i int) error) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(i); err != nil {
					errs <- err
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func httpDo(ctx context.Context, c *http.Client, method, url, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}
