//go:build integration && linux

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// reloadServeConfig has one intent type served by a slow agent (it answers
// after 20s: every intent resolves by its timeout and fallback). %[4]s and
// %[5]s are slow_check's timeout and static fallback; %[6]s is appended to
// the router section.
const reloadServeConfig = `kafka:
  bootstrap_servers: %[2]s
  group_id: %[1]s.router
` + shortTopics + `  partitions: 3
  auto_create: true
agents:
  slow: {topic: %[1]s.agent.slow, encoding: json}
intents:
  slow_check:
    agent: slow
    timeout: %[4]s
    fallback: {static: {v: %[5]s}}
router:
  delivery: exactly_once%[6]s
http:
  listen: 127.0.0.1:0
  auth:
    api_keys:
      - {name: load, tenant: acme, key_sha256: %[3]s}
      - {name: ops, tenant: ops, key_env: SWITCHBOARD_TEST_KEY_OPS, admin: true}
`

// submitted is one intent the load generator published, with the wall
// clock just before its POST and just after its answer: its record's
// timestamp lies between (the test, serve and the broker share a host).
type submitted struct {
	id            string
	before, after time.Time
}

// TestReloadUnderLoadOnKafka changes a type's timeout (1s to 6s) and
// fallback while an open-loop publisher submits through the API and a slow
// agent answers too late: every intent resolves with the timeout and the
// fallback of the configuration in force when the router read it (one
// published after the reload answered: the new one), intents pending at
// the reload keep theirs, and the results topic (read_committed)
// holds each accepted intent exactly once. Then a file with a typo and a
// restart-only change are refused, naming the key, and the instance keeps
// serving with the configuration in force; SIGHUP reloads too.
func TestReloadUnderLoadOnKafka(t *testing.T) {
	bootstrap := apacheKafka(t)
	const keyLoad, keyOps = "sk_load_integration_0123456789", "sk_ops_integration_0123456789"
	t.Setenv("SWITCHBOARD_TEST_KEY_OPS", keyOps)
	sum := sha256.Sum256([]byte(keyLoad))
	prefix := "reload." + randomHex(4)
	path := filepath.Join(t.TempDir(), "switchboard.yaml")
	write := func(timeout, fallback, router string) {
		t.Helper()
		if err := os.WriteFile(path, fmt.Appendf(nil, reloadServeConfig, prefix, bootstrap, hex.EncodeToString(sum[:]), timeout, fallback, router), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("1s", "old", "")

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var serveLog, agentLog syncBuffer
	served, agentDone := make(chan int, 1), make(chan int, 1)
	go func() { served <- run(ctx, []string{"serve", "--config", path}, io.Discard, &serveLog) }()
	eventually(t, "serve to listen", func() bool { return strings.Contains(serveLog.String(), "api listening") })
	go func() {
		agentDone <- run(ctx, []string{"agent", "--config", path, "--name", "slow", "--delay", "20s", "--brokers", bootstrap}, io.Discard, &agentLog)
	}()
	defer func() {
		cancel()
		<-served
		<-agentDone
		if t.Failed() {
			t.Logf("serve log:\n%s", serveLog.String())
		}
	}()
	m := regexp.MustCompile(`"api listening" addr=(\S+)`).FindStringSubmatch(serveLog.String())
	if m == nil {
		t.Fatalf("no api address in the log:\n%s", serveLog.String())
	}
	base := "http://" + m[1]
	do := func(method, path, key, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	eventually(t, "serve to be ready", func() bool { code, _ := do("GET", "/readyz", "", ""); return code == 200 })

	// The open-loop publisher: one intent every 25ms (40/s), each POST on
	// its own goroutine, whatever the previous ones are doing.
	var (
		mu    sync.Mutex
		subs  []submitted
		wg    sync.WaitGroup
		fails []string
	)
	loadCtx, stopLoad := context.WithCancel(ctx)
	var loadDone sync.WaitGroup
	loadDone.Add(1)
	go func() {
		defer loadDone.Done()
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-loadCtx.Done():
				return
			case <-tick.C:
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				before := time.Now()
				req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/intents", strings.NewReader(`{"intent_type":"slow_check","payload":{}}`))
				req.Header.Set("Authorization", "Bearer "+keyLoad)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					mu.Lock()
					fails = append(fails, err.Error())
					mu.Unlock()
					return
				}
				b, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				after := time.Now()
				var acc struct {
					IntentID string `json:"intent_id"`
				}
				mu.Lock()
				defer mu.Unlock()
				if resp.StatusCode != http.StatusAccepted || json.Unmarshal(b, &acc) != nil || acc.IntentID == "" {
					fails = append(fails, fmt.Sprintf("%d %s", resp.StatusCode, b))
					return
				}
				subs = append(subs, submitted{id: acc.IntentID, before: before, after: after})
			}()
		}
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(subs) }
	eventually(t, "80 intents under the old configuration", func() bool { return count() >= 80 })

	// A non-admin may not reload.
	if code, body := do("POST", "/v1/admin/reload", keyLoad, ""); code != http.StatusForbidden || !strings.Contains(string(body), "forbidden_admin") {
		t.Fatalf("reload by a tenant's key: %d %s", code, body)
	}
	write("6s", "new", "")
	reloadStart := time.Now()
	code, body := do("POST", "/v1/admin/reload", keyOps, "")
	reloadEnd := time.Now()
	var applied struct {
		Result, Hash string
	}
	if code != http.StatusOK || json.Unmarshal(body, &applied) != nil || applied.Result != "applied" || applied.Hash == "" {
		t.Fatalf("reload: %d %s", code, body)
	}
	eventually(t, "80 intents under the new configuration", func() bool { return count() >= 160 })
	stopLoad()
	loadDone.Wait()
	wg.Wait()
	if len(fails) > 0 {
		t.Fatalf("%d submissions failed, first: %s", len(fails), fails[0])
	}

	// Every accepted intent resolves once, by the fallback of its timeout.
	type outcome struct {
		n                  int
		answer             string
		deadln, resolvedAt int64
	}
	codec, err := schemas.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]*outcome
	deadline := time.Now().Add(90 * time.Second)
	for {
		got = map[string]*outcome{}
		err := readToEnd(ctx, bootstrap, prefix+".result", func(msg *kafka.Message) {
			var res schemas.IntentResult
			if err := codec.Decode(msg.Value, &res); err != nil {
				t.Errorf("a result does not decode: %v", err)
				return
			}
			o := got[res.IntentID]
			if o == nil {
				o = &outcome{}
				got[res.IntentID] = o
			}
			o.n++
			if res.Answer != nil {
				o.answer = string(*res.Answer)
			}
			o.deadln, o.resolvedAt = res.Timeline.Deadline, res.Timeline.ResolvedAt
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) >= len(subs) || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(500 * time.Millisecond): // re-read the topic; not a synchronisation
		}
	}
	var lost, dup, old, fresh, pendingAtReload, during, readAfter int
	for _, s := range subs {
		o := got[s.id]
		switch {
		case o == nil:
			lost++
			continue
		case o.n > 1:
			dup++
		}
		// The record's timestamp ts is in [before, after], to the ms; the
		// deadline is ts plus the timeout the router applied.
		fits := func(timeout time.Duration) bool {
			ts := o.deadln - timeout.Milliseconds()
			return ts >= s.before.UnixMilli()-1 && ts <= s.after.UnixMilli()+1
		}
		switch {
		case fits(time.Second) && o.answer == `{"v":"old"}`:
			old++
			// Admitted with the old configuration, resolved after the
			// reload was applied: pending while it was.
			if o.resolvedAt > reloadEnd.UnixMilli() {
				pendingAtReload++
			}
			if s.before.After(reloadEnd) {
				t.Errorf("intent %s, submitted after the reload, resolved with the old timeout and fallback", s.id)
			}
		case fits(6*time.Second) && o.answer == `{"v":"new"}`:
			fresh++
			if s.after.Before(reloadStart) {
				readAfter++ // published before, read by the router after the apply
			}
		default:
			t.Errorf("intent %s (submitted %s..%s) resolved with deadline %d and answer %s: neither configuration's", s.id,
				s.before.Format(time.StampMilli), s.after.Format(time.StampMilli), o.deadln, o.answer)
		}
		if !s.after.Before(reloadStart) && !s.before.After(reloadEnd) {
			during++
		}
	}
	var slowest time.Duration
	for _, s := range subs {
		slowest = max(slowest, s.after.Sub(s.before))
	}
	t.Logf("the reload's POST took %s; the slowest intent's POST %s", reloadEnd.Sub(reloadStart).Round(time.Millisecond), slowest.Round(time.Millisecond))
	t.Logf("%d intents: %d with the old 1s timeout and fallback (%d of them pending at the reload), %d with the new 6s (%d of them published before the reload, read after it); %d submitted during the reload; %d lost, %d duplicated",
		len(subs), old, pendingAtReload, fresh, readAfter, during, lost, dup)
	if lost > 0 || dup > 0 {
		t.Fatalf("%d lost and %d duplicated on the results topic", lost, dup)
	}
	if pendingAtReload == 0 || fresh == 0 {
		t.Fatalf("the run shows no intent pending at the reload (%d) or none after it (%d)", pendingAtReload, fresh)
	}

	// A typo: refused, said with file:line: key, counted; the instance
	// keeps the configuration in force.
	good, _ := os.ReadFile(path)
	typo := strings.Replace(string(good), "    timeout: 6s", "    timeot: 2s", 1)
	if err := os.WriteFile(path, []byte(typo), 0o600); err != nil {
		t.Fatal(err)
	}
	code, body = do("POST", "/v1/admin/reload", keyOps, "")
	if code != http.StatusUnprocessableEntity || !strings.Contains(string(body), `"config_invalid"`) ||
		!strings.Contains(string(body), "intents.slow_check.timeot") || !strings.Contains(string(body), `"hash":"`+applied.Hash+`"`) {
		t.Fatalf("reload of a file with a typo: %d %s", code, body)
	}
	if !regexp.MustCompile(`switchboard.yaml:\d+: intents.slow_check.timeot`).MatchString(serveLog.String()) {
		t.Fatal("no log line names the typo's file:line: key")
	}
	// A restart-only change: refused naming the key.
	write("2s", "newer", "\n  commit_interval: 50ms")
	code, body = do("POST", "/v1/admin/reload", keyOps, "")
	if code != http.StatusConflict || !strings.Contains(string(body), `"restart_required"`) || !strings.Contains(string(body), `"router.commit_interval"`) {
		t.Fatalf("reload of a restart-only change: %d %s", code, body)
	}
	if !strings.Contains(serveLog.String(), "keys=router.commit_interval") {
		t.Fatal("no log line names the restart-only key")
	}
	// Still serving with the 6s configuration.
	code, body = do("GET", "/v1/intent-types", keyLoad, "")
	if code != 200 || !strings.Contains(string(body), `"timeout_ms":6000`) {
		t.Fatalf("intent types after the refused reloads: %d %s", code, body)
	}

	// SIGHUP reloads too: a 2s timeout.
	write("2s", "newest", "")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the SIGHUP reload", func() bool {
		_, b := do("GET", "/v1/intent-types", keyLoad, "")
		return strings.Contains(string(b), `"timeout_ms":2000`)
	})
	_, metrics := do("GET", "/metrics", "", "")
	for _, want := range []string{
		`switchboard_config_reloads_total{result="applied"} 2`,
		`switchboard_config_reloads_total{result="invalid"} 1`,
		`switchboard_config_reloads_total{result="refused"} 1`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Fatalf("metrics lack %s", want)
		}
	}
	if n := strings.Count(string(metrics), "switchboard_config_info{"); n != 1 || strings.Contains(string(metrics), `switchboard_config_info{hash="`+applied.Hash+`"}`) {
		t.Fatalf("%d switchboard_config_info series, or the replaced hash's is still there", n)
	}
}
