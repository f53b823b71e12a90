package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
