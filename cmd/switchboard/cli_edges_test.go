package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/embedded"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
)

// runCLI runs the binary's entry point with args and returns its exit code,
// stdout and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// busyAddr is a loopback address something already listens on.
func busyAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().String()
}

// Issue 14: 'switchboard version' printed "switchboard dev", which reads as
// the command of that name.
func TestVersionIsNotTheDevCommand(t *testing.T) {
	code, out, _ := runCLI(t, "version")
	if code != 0 || !regexp.MustCompile(`^switchboard (v\S+|\(devel\)( [0-9a-f]{1,12}(\+dirty)?)?)\n$`).MatchString(out) {
		t.Fatalf("version: exit %d, printed %q", code, out)
	}
}

// Issue 14: the help texts' rough edges, each asserted on the text a user reads.
func TestHelpTexts(t *testing.T) {
	dir := t.TempDir()
	notJSON := filepath.Join(dir, "doc.txt")
	if err := os.WriteFile(notJSON, []byte("not json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args         []string
		code         int
		want, unwant string
	}{
		// serve without --config says it is required, before the usage.
		{[]string{"serve"}, 2, "--config is required", ""},
		// The flag's placeholder read "-concurrency once".
		{[]string{"agent", "--help"}, 0, "-concurrency number", "-concurrency once"},
		// --registry is not only "for reading" on commands that write.
		{[]string{"send", "--help"}, 0, "written through it when the config names a registry", "for reading Avro records"},
		{[]string{"send", "--help"}, 0, "@FILE to read it from a file", ""},
		// dev's port example moves the registry too.
		{[]string{"dev", "--help"}, 0, "--kafka-port 19092 --registry 127.0.0.1:18081 --http 127.0.0.1:18080", ""},
		// --payload @FILE reads the file, as the example says.
		{[]string{"send", "--type", "echo", "--payload", "@" + filepath.Join(dir, "missing.json")}, 1, "--payload @" + filepath.Join(dir, "missing.json") + ": open", ""},
		{[]string{"send", "--type", "echo", "--payload", "@" + notJSON}, 1, "payload: not a valid JSON document (flag --payload)", ""},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.args...)
			all := out + errOut
			if code != tc.code || !strings.Contains(all, tc.want) || (tc.unwant != "" && strings.Contains(all, tc.unwant)) {
				t.Fatalf("exit %d (want %d), output:\n%s\nwant %q, not %q", code, tc.code, all, tc.want, tc.unwant)
			}
		})
	}
}

func TestPayloadArg(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "doc.json")
	if err := os.WriteFile(doc, []byte(" {\"q\":1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ arg, stdin, want string }{
		{`{"a":2}`, "", `{"a":2}`},
		{"@" + doc, "", `{"q":1}`},
		{"@-", "{\"s\":3}\n", `{"s":3}`},
	} {
		got, err := payloadArg(tc.arg, strings.NewReader(tc.stdin))
		if err != nil || string(got) != tc.want {
			t.Fatalf("payloadArg(%q) = %q, %v; want %q", tc.arg, got, err, tc.want)
		}
	}
}

// Issue 14: a registry address in use named --kafka-port as the way out.
func TestDevBindErrorsNameTheirFlag(t *testing.T) {
	busy := busyAddr(t)
	code, _, errOut := runCLI(t, "dev", "--kafka-port", "0", "--registry", busy, "--http", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, "starting the schema registry on "+busy) || !strings.Contains(errOut, "--registry 127.0.0.1:0") || strings.Contains(errOut, "--kafka-port") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	_, port, _ := net.SplitHostPort(busyAddr(t))
	code, _, errOut = runCLI(t, "dev", "--kafka-port", port, "--registry", "127.0.0.1:0", "--http", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, "starting the broker") || !strings.Contains(errOut, "--kafka-port 0") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// Issue 14: the API's listen error read "api: api: listen on …".
func TestDevAPIListenErrorSaysAPIOnce(t *testing.T) {
	busy := busyAddr(t)
	code, _, errOut := runCLI(t, "dev", "--kafka-port", "0", "--registry", "127.0.0.1:0", "--http", busy, "--agents=false")
	if code != 1 || !strings.Contains(errOut, "api: listen on "+busy) || strings.Contains(errOut, "api: api:") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// TestCLIHelperProcess is not a test: it is the switchboard binary when
// another test runs this test binary with SWITCHBOARD_CLI_HELPER=1, so that
// the other test sees what reaches the process's real stderr (librdkafka
// writes its log lines there, not to run's writer).
func TestCLIHelperProcess(t *testing.T) {
	if os.Getenv("SWITCHBOARD_CLI_HELPER") != "1" {
		return
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Exit(run(context.Background(), args, os.Stdout, os.Stderr))
}

// runProcess runs the CLI as a process and returns its exit code and its
// whole stderr.
func runProcess(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestCLIHelperProcess$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "SWITCHBOARD_CLI_HELPER=1")
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), errOut.String()
}

// Issue 14: send to a stopped broker took 35 s and printed librdkafka's
// connection errors; it now fails after --publish-timeout with one line.
func TestSendToAStoppedBrokerFailsFastInOneLine(t *testing.T) {
	broker := closedAddr(t)
	code, errOut := runProcess(t, "send", "--brokers", broker, "--type", "echo", "--publish-timeout", "1s")
	want := "switchboard send: nothing published: the broker at " + broker + " did not acknowledge the intent within 1s (--publish-timeout): is Kafka running there?"
	if code != 1 || !strings.HasPrefix(errOut, want) || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("exit %d, stderr:\n%s\nwant one line starting %q", code, errOut, want)
	}
}

// Issue 14: send --wait said "is the router running? try tail dlq" whatever
// went wrong. Each cause now has its own message.
func TestSendWaitSaysWhatWentWrong(t *testing.T) {
	t.Run("broker down", func(t *testing.T) {
		broker := closedAddr(t)
		code, _, errOut := runCLI(t, "send", "--brokers", broker, "--type", "echo", "--wait", "2s")
		if code != 1 || !strings.Contains(errOut, "nothing published: could not read mcp.intent.result at "+broker+" within 2s: is Kafka running there?") || strings.Contains(errOut, "router") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	})
	t.Run("no router", func(t *testing.T) {
		cluster, err := embedded.Start(embedded.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer cluster.Close()
		cfg, err := config.Parse("t", []byte("agents: {a: {}}\nintents: {a: {agent: a}}\n"), nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Kafka.BootstrapServers = cluster.Bootstrap()
		if _, err := kafkaio.EnsureTopics(context.Background(), settingsOf(cfg, "t"), cfg.TopicPlans(), true); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runCLI(t, "send", "--brokers", cluster.Bootstrap(), "--type", "echo", "--wait", "2s")
		if code != 1 || !regexp.MustCompile(`intent \S+ published, but no result within 2s \(is the router running\?`).MatchString(errOut) {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	})
	t.Run("registry unreachable", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var banner, devErr syncBuffer
		done := make(chan int, 1)
		go func() {
			done <- run(ctx, []string{"dev", "--kafka-port", "0", "--registry", "127.0.0.1:0", "--http", "127.0.0.1:0"}, &banner, &devErr)
		}()
		defer func() { cancel(); <-done }()
		eventually(t, "the dev banner", func() bool { return strings.Contains(banner.String(), "Stop with Ctrl-C") })
		brokers := regexp.MustCompile(`--brokers (\S+)`).FindStringSubmatch(banner.String())
		if brokers == nil {
			t.Fatalf("banner lacks --brokers:\n%s", banner.String())
		}
		reg := "http://" + closedAddr(t)
		code, _, errOut := runCLI(t, "send", "--brokers", brokers[1], "--registry", reg, "--type", "echo", "--wait", "30s")
		if code != 1 || !regexp.MustCompile(`the result of intent \S+ arrived but could not be decoded \(the router answered; check the schema registry at `+regexp.QuoteMeta(reg)).MatchString(errOut) {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	})
}

// Issue 14: tail retried silently forever when it could not read; it says
// so once, and --give-up makes it exit.
func TestTailSaysOnceItCannotRead(t *testing.T) {
	defer func(d time.Duration) { tailNoticeAfter = d }(tailNoticeAfter)
	tailNoticeAfter = 100 * time.Millisecond
	broker := closedAddr(t)
	code, _, errOut := runCLI(t, "tail", "--brokers", broker, "--give-up", "3s")
	what := "cannot read mcp.intent.result at " + broker + " (is Kafka running there, and does the topic exist?)"
	if code != 1 || strings.Count(errOut, what+"; still trying, up to 3s (--give-up)\n") != 1 ||
		!strings.Contains(errOut, "switchboard tail: gave up after 3s: "+what) {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
}

// Issue 14: tail printed binary keys and values raw, escape sequences
// included.
func TestTailPrintsBinarySafely(t *testing.T) {
	cluster, err := embedded.Start(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	s := kafkaio.Settings{Bootstrap: cluster.Bootstrap(), Properties: map[string]string{"log_level": "2"}}
	plan := config.TopicPlan{Name: "raw.bytes", Role: "test", Partitions: 1, ReplicationFactor: 1, RetentionMs: 3600000, MaxMessageBytes: 1 << 20}
	if _, err := kafkaio.EnsureTopics(context.Background(), s, []config.TopicPlan{plan}, true); err != nil {
		t.Fatal(err)
	}
	p, err := kafkaio.NewProducer(s)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := p.Send(ctx, "raw.bytes", []byte("k\x07"), []byte("\x00\x00\x00\x00\x01\x1b[31mred\xff"), nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	p.Close(5 * time.Second)
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"tail", "--brokers", cluster.Bootstrap(), "--topic", "raw.bytes", "--from-beginning"}, &out, &errOut)
	}()
	eventually(t, "the record", func() bool { return strings.Contains(out.String(), "red") })
	cancel()
	<-done
	if got := out.String(); strings.ContainsAny(got, "\x00\x07\x1b") || strings.Contains(got, "\xff") || !strings.Contains(got, `"k\a"`) || !strings.Contains(got, `"\x00\x00\x00\x00\x01\x1b[31mred\xff"`) {
		t.Fatalf("tail printed %q", got)
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":"é"}`:   `{"a":"é"}`,
		"two\nlines":  "two\nlines",
		"\x00avro":    `"\x00avro"`,
		"bad \xff":    `"bad \xff"`,
		"esc \x1b[2J": `"esc \x1b[2J"`,
	} {
		if got := printable([]byte(in)); got != want {
			t.Errorf("printable(%q) = %s, want %s", in, got, want)
		}
	}
}

// Issue 14: serve with no broker said "Broker transport failure" and no more.
func TestServeWithNoBrokerSaysWhereToLook(t *testing.T) {
	broker := closedAddr(t)
	path := filepath.Join(t.TempDir(), "sb.yaml")
	yaml := "kafka:\n  bootstrap_servers: " + broker + "\nhttp:\n  listen: 127.0.0.1:0\n  auth:\n    mode: off\nagents: {a: {}}\nintents: {a: {agent: a}}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(config.EnvBootstrap, "")
	code, _, errOut := runCLI(t, "serve", "--config", path, "--insecure-no-auth")
	want := "(no Kafka broker answered at " + broker + ", named by kafka.bootstrap_servers of " + path + " or " + config.EnvBootstrap + ": is Kafka running there? 'make kafka-up' starts one"
	if code != 1 || !strings.Contains(errOut, want) {
		t.Fatalf("exit %d, stderr:\n%s\nwant %q", code, errOut, want)
	}
}

// A signal while serve waits for a broker ends it as interrupted (130, one
// line saying so), not as a failure of the step it was on.
func TestServeInterruptedWhileWaitingSaysSo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sb.yaml")
	yaml := "kafka:\n  bootstrap_servers: " + closedAddr(t) + "\nhttp:\n  listen: 127.0.0.1:0\n  auth:\n    mode: off\nagents: {a: {}}\nintents: {a: {agent: a}}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(config.EnvBootstrap, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the signal came before the broker answered
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"serve", "--config", path, "--insecure-no-auth"}, &out, &errOut)
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	if code != 130 || !strings.HasPrefix(lines[len(lines)-1], "switchboard serve: interrupted before it finished (") || strings.Count(errOut.String(), "switchboard serve:") != 1 {
		t.Fatalf("exit %d, stderr:\n%s\nwant 130 and one line saying it was interrupted", code, errOut.String())
	}
}
