//go:build integration && linux

package main

// Switchboard against a secured cluster (issue 21): SASL_SSL with
// SCRAM-SHA-512, the StandardAuthorizer, and only the ACLs 'switchboard
// topics acls' gives. The cluster is deploy/kafka/kafka.sh cluster up
// --secure; make secure-check starts it, runs this test and stops it.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
)

// secureCluster is what kafka.sh cluster up --secure printed.
type secureCluster struct {
	bootstrap, ca, adminUser, adminPassword string
}

func secureClusterFromEnv(t *testing.T) secureCluster {
	t.Helper()
	if os.Getenv("KAFKA_SECURITY_PROTOCOL") != "SASL_SSL" {
		t.Skip("KAFKA_SECURITY_PROTOCOL is not SASL_SSL: make secure-check starts a secured cluster (kafka.sh cluster up --secure) and runs this test")
	}
	c := secureCluster{os.Getenv("KAFKA_BOOTSTRAP"), os.Getenv("KAFKA_CA"), os.Getenv("KAFKA_ADMIN_USER"), os.Getenv("KAFKA_ADMIN_PASSWORD")}
	if c.bootstrap == "" || c.ca == "" || c.adminUser == "" || c.adminPassword == "" {
		t.Fatal("KAFKA_BOOTSTRAP, KAFKA_CA, KAFKA_ADMIN_USER and KAFKA_ADMIN_PASSWORD must be set: eval \"$(deploy/kafka/kafka.sh cluster up --secure)\"")
	}
	return c
}

// settings are a client's as user, trusting ca.
func (c secureCluster) settings(user, password, ca string) kafkaio.Settings {
	return kafkaio.Settings{Bootstrap: c.bootstrap, ClientID: "switchboard-secure-test", Properties: map[string]string{
		"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512", "ssl.ca.location": ca,
		"sasl.username": user, "sasl.password": password,
	}}
}

const secureConfig = `# The secured cluster test's configuration (cmd/switchboard/secure_integration_test.go).
kafka:
  bootstrap_servers: %[2]s
  group_id: %[1]s.router
  properties:
    security.protocol: SASL_SSL
    sasl.mechanisms: SCRAM-SHA-512
    ssl.ca.location: %[3]s
    # sasl.username and sasl.password: SWITCHBOARD_KAFKA_SASL_USERNAME and _PASSWORD, per process
` + pipelineTopics + `  partitions: 3
  replication_factor: %[4]d
agents:
  a: {topic: %[1]s.agent.a.request, group_id: %[1]s.agent.a}
  b: {topic: %[1]s.agent.b.request, group_id: %[1]s.agent.b}
intents:
  echo: {agent: a, timeout: 20s}
router:
  delivery: exactly_once
  instance_id: secure-1
  lag_interval: 1s
http:
  listen: 127.0.0.1:0
  auth:
    api_keys: [{name: t, tenant: t, key_sha256: 4809b6d2a8ffa977c0703d11e47b57bd57305fea5246d94c642615546724c3e0}]
log:
  level: info
`

// TestSecureClusterApacheKafka: serve, an agent and 'send' complete a round
// trip on SASL_SSL with only the ACLs 'switchboard topics acls' applies;
// an agent's principal may neither read another agent's topic nor write
// results; a wrong password, an untrusted certificate and a missing ACL
// each end a command with its one line.
func TestSecureClusterApacheKafka(t *testing.T) {
	cl := secureClusterFromEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "switchboard")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	prefix := "secure." + randomHex(4)
	rf := 3
	if n := strings.Count(cl.bootstrap, ",") + 1; n < 3 {
		rf = n
	}
	cfgPath := filepath.Join(dir, "switchboard.yaml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, secureConfig, prefix, cl.bootstrap, cl.ca, rf), 0o644); err != nil {
		t.Fatal(err)
	}
	results := prefix + ".intent.result"
	topicB := prefix + ".agent.b.request"

	// The users, each with its own password, made by the admin.
	users := map[string]string{"switchboard": "", "agent-a": "", "agent-b": "", "client": ""}
	for u := range users {
		users[u] = "pw-" + randomHex(8)
	}
	createSCRAMUsers(ctx, t, cl, users)
	as := func(user string) []string {
		return append(os.Environ(), "SWITCHBOARD_KAFKA_SASL_USERNAME="+user, "SWITCHBOARD_KAFKA_SASL_PASSWORD="+users[user])
	}
	asAdmin := append(os.Environ(), "SWITCHBOARD_KAFKA_SASL_USERNAME="+cl.adminUser, "SWITCHBOARD_KAFKA_SASL_PASSWORD="+cl.adminPassword)
	run := func(env []string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}

	// Topics and ACLs, as the admin; the ACLs are printed for the log.
	if out, err := run(asAdmin, "topics", "create", "--config", cfgPath); err != nil {
		t.Fatalf("topics create: %v\n%s", err, out)
	}
	out, err := run(asAdmin, "topics", "acls", "--config", cfgPath, "--apply",
		"--router", "User:switchboard", "--api", "User:switchboard", "--agent", "a=User:agent-a", "--agent", "b=User:agent-b")
	if err != nil {
		t.Fatalf("topics acls --apply: %v\n%s", err, out)
	}
	t.Logf("the ACLs applied:\n%s", out)
	if out, err := run(asAdmin, "topics", "acls", "--config", cfgPath, "--apply", "--api", "User:client"); err != nil {
		t.Fatalf("topics acls --apply --api User:client: %v\n%s", err, out)
	}

	// Each broker applies new rules once it has read them from the metadata
	// log: 'acls --apply' waited until one listed them all; each principal
	// waits until its first request is allowed too.
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	awaitAuthorized(ctx, t, "switchboard", func(ctx context.Context) error {
		_, err := kafkaio.EnsureTopics(ctx, cl.settings("switchboard", users["switchboard"], cl.ca), cfg.TopicPlans(), false)
		return err
	})
	for user, topic := range map[string]string{"agent-a": prefix + ".agent.a.request", "client": results} {
		awaitAuthorized(ctx, t, user, func(ctx context.Context) error {
			_, err := kafkaio.LowWatermarks(ctx, cl.settings(user, users[user], cl.ca), []string{topic})
			return err
		})
	}

	// The round trip: serve as switchboard, agent a as agent-a, send as client.
	serve := &proc{name: "serve", bin: bin, args: []string{"serve", "--config", cfgPath}, env: as("switchboard"), logPath: filepath.Join(dir, "serve.log")}
	agent := &proc{name: "agent-a", bin: bin, args: []string{"agent", "--config", cfgPath, "--name", "a"}, env: as("agent-a"), logPath: filepath.Join(dir, "agent.log")}
	t.Cleanup(func() {
		for _, p := range []*proc{serve, agent} {
			p.stop(20 * time.Second)
			if t.Failed() {
				t.Logf("last lines of %s:\n%s", p.name, p.tail(30))
			}
		}
	})
	if err := serve.start(); err != nil {
		t.Fatal(err)
	}
	if err := serve.waitLog(ctx, 2*time.Minute, "partitions taken over"); err != nil {
		t.Fatal(err)
	}
	if err := agent.start(); err != nil {
		t.Fatal(err)
	}
	if err := agent.waitLog(ctx, time.Minute, "demo agent running"); err != nil {
		t.Fatal(err)
	}
	out, err = run(as("client"), "send", "--config", cfgPath, "--type", "echo", "--payload", `{"q":"secured"}`, "--wait", "90s")
	if err != nil {
		t.Fatalf("send --wait as client: %v\n%s", err, out)
	}
	var res struct {
		IntentID string          `json:"intent_id"`
		Outcome  string          `json:"outcome"`
		Answer   json.RawMessage `json:"answer"`
	}
	if err := json.Unmarshal([]byte(lastLine(out)), &res); err != nil || res.Outcome != "answered" || !strings.Contains(string(res.Answer), "secured") {
		t.Fatalf("send --wait: want an answered result echoing the payload, got %q (%v)", out, err)
	}
	// The other commands reach the secured cluster through the same
	// kafka.properties: cancel as the caller (Write on requests), context
	// publish and dlq list as the admin (no principal of 'topics acls'
	// writes context snapshots or reads dead letters).
	for _, c := range []struct {
		env  []string
		args []string
	}{
		{as("client"), []string{"cancel", "--config", cfgPath, "--reason", "secured", res.IntentID}},
		{asAdmin, []string{"context", "publish", "--config", cfgPath, "--entity", "e-secure", "--features", `{"clicks_5m": 3}`}},
		{asAdmin, []string{"dlq", "list", "--config", cfgPath}},
	} {
		if out, err := run(c.env, c.args...); err != nil {
			t.Errorf("%s on SASL_SSL: %v\n%s", strings.Join(c.args[:2], " "), err, out)
		}
	}
	// A lag sample (router.lag_interval 1s) that found agent b's group
	// missing, or failed: the router's Describe on the agents' groups is
	// enough for the first, and the check below catches the second.
	if err := serve.waitLog(ctx, 30*time.Second, "agent's consumer group does not exist", "sampling an agent's lag failed"); err != nil {
		t.Error(err)
	}
	for _, p := range []*proc{serve, agent} {
		if log := p.current(); strings.Contains(log, "not authorized") || strings.Contains(log, "refused") {
			t.Errorf("%s logged a refusal with the ACLs topics acls applied:\n%s", p.name, grepLines(log, "not authorized", "refused"))
		}
		for _, l := range logSummary(p.current()) {
			t.Logf("log %s: %s", p.name, l)
		}
	}

	// Agent a's principal may not read agent b's topic, ...
	out, err = run(as("agent-a"), "agent", "--config", cfgPath, "--name", "b")
	t.Logf("agent b run as agent-a: %v: %s", err, lastLine(out))
	if err == nil || !strings.Contains(out, "kafkaio: not authorized: the broker denied User:agent-a Read on ") || !strings.Contains(out, prefix+".agent.b") {
		t.Errorf("agent b run as agent-a: want a refusal naming User:agent-a and b's topic or group, got %v:\n%s", err, out)
	}
	aS := cl.settings("agent-a", users["agent-a"], cl.ca)
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	err = kafkaio.Read(rctx, aS, kafkaio.Reading{Topics: []string{topicB}, From: kafkaio.FromBeginning(), Group: prefix + ".agent.a"}, func(*port.Record) error { return nil })
	rcancel()
	t.Logf("agent-a consuming b's topic in its own group: %v", err)
	wantLine(t, "agent-a consuming b's topic in its own group", err, kafkaio.ErrNotAuthorized,
		"kafkaio: not authorized: the broker denied User:agent-a Read on topic "+topicB+" (Topic authorization failed)")
	// ... nor write results.
	p, err := kafkaio.NewProducer(aS)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	err = p.Send(wctx, results, []byte("forged"), []byte(`{"intent_id":"forged"}`), nil, time.Time{})
	wcancel()
	p.Close(time.Second)
	t.Logf("agent-a writing a result: %v", err)
	wantLine(t, "agent-a writing a result", err, kafkaio.ErrNotAuthorized,
		"kafkaio: not authorized: the broker denied User:agent-a Write on topic "+results+" (Topic authorization failed)")

	// A wrong password and an untrusted certificate, through 'send'.
	out, err = run(append(as("client"), "SWITCHBOARD_KAFKA_SASL_PASSWORD=not-"+users["client"]), "send", "--config", cfgPath, "--type", "echo")
	t.Logf("send with a wrong password: %v: %s", err, out)
	if err == nil || !strings.Contains(out, "kafkaio: the brokers refused the SASL credentials of User:client (Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512): check sasl.username and sasl.password in kafka.properties, or SWITCHBOARD_KAFKA_SASL_USERNAME and SWITCHBOARD_KAFKA_SASL_PASSWORD") {
		t.Errorf("send with a wrong password: got %v:\n%s", err, out)
	}
	if n := strings.Count(out, "\n"); n > 0 {
		t.Errorf("send with a wrong password printed %d lines, want one:\n%s", n+1, out)
	}
	otherCA := writeOtherCA(t, dir)
	untrusted := filepath.Join(dir, "untrusted.yaml")
	if err := os.WriteFile(untrusted, fmt.Appendf(nil, secureConfig, prefix, cl.bootstrap, otherCA, rf), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = run(as("client"), "send", "--config", untrusted, "--type", "echo")
	t.Logf("send trusting another CA: %v: %s", err, out)
	if err == nil || !strings.Contains(out, " is not trusted (certificate verify failed): ssl.ca.location ("+otherCA+") is not the CA that signed the brokers' certificates") {
		t.Errorf("send trusting another CA: got %v:\n%s", err, out)
	}
	// A missing ACL, through 'send': the client may not write agent b's topic.
	out, err = run(as("agent-b"), "send", "--config", cfgPath, "--type", "echo")
	t.Logf("send as agent-b: %v: %s", err, out)
	if err == nil || !strings.Contains(out, "kafkaio: not authorized: the broker denied User:agent-b Write on topic "+prefix+".intent.request (Topic authorization failed)") {
		t.Errorf("send as agent-b (no Write on requests): got %v:\n%s", err, out)
	}
}

// awaitAuthorized calls try until it is not denied, for at most a minute.
func awaitAuthorized(ctx context.Context, t *testing.T, who string, try func(context.Context) error) {
	t.Helper()
	var last error
	if err := waitUntil(ctx, time.Minute, 200*time.Millisecond, func() bool {
		tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		last = try(tctx)
		return !errors.Is(last, kafkaio.ErrNotAuthorized)
	}); err != nil {
		t.Fatalf("%s still denied a minute after the ACLs were applied: %v", who, last)
	}
	if last != nil {
		t.Fatalf("%s: %v", who, last)
	}
}

// wantLine checks that err is of kind and says want, on one line.
func wantLine(t *testing.T, what string, err, kind error, want string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Errorf("%s: got %v, want %v", what, err, kind)
		return
	}
	if !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("%s:\n got %s\nwant %s…", what, err, want)
	}
}

func createSCRAMUsers(ctx context.Context, t *testing.T, cl secureCluster, users map[string]string) {
	t.Helper()
	cm := kafka.ConfigMap{"bootstrap.servers": cl.bootstrap, "enable.metrics.push": false}
	for k, v := range cl.settings(cl.adminUser, cl.adminPassword, cl.ca).Properties {
		cm[k] = v
	}
	a, err := kafka.NewAdminClient(&cm)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var ups []kafka.UserScramCredentialUpsertion
	for u, pw := range users {
		ups = append(ups, kafka.UserScramCredentialUpsertion{
			User: u, Password: []byte(pw), ScramCredentialInfo: kafka.ScramCredentialInfo{Mechanism: kafka.ScramMechanismSHA512, Iterations: 4096},
		})
	}
	actx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err := a.AlterUserScramCredentials(actx, ups, nil)
	if err != nil {
		t.Fatalf("creating SCRAM users: %v", err)
	}
	for u, e := range res.Errors {
		if e.Code() != kafka.ErrNoError {
			t.Fatalf("creating SCRAM user %s: %v", u, e)
		}
	}
}

// writeOtherCA writes a CA certificate that signed none of the brokers'.
func writeOtherCA(t *testing.T, dir string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not the cluster's CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "other-ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func grepLines(log string, words ...string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				out = append(out, clip(l, 400))
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
