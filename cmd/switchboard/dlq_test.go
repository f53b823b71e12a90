package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestDLQAndCancelUsage checks the usage errors of dlq and cancel, which are
// found before any connection is made.
func TestDLQAndCancelUsage(t *testing.T) {
	cases := []struct {
		args        []string
		code        int
		out, errOut string
	}{
		{[]string{"dlq"}, 2, "", "list|replay"},
		{[]string{"dlq", "--help"}, 0, "replay  put selected records back", ""},
		{[]string{"dlq", "list", "--help"}, 0, "", "Examples:"},
		{[]string{"dlq", "replay", "--help"}, 0, "", "not idempotent"},
		{[]string{"dlq", "replay"}, 2, "", "select what to replay"},
		{[]string{"dlq", "list", "--since", "yesterday"}, 2, "", `--since: "yesterday" is neither a time`},
		{[]string{"dlq", "list", "--offset", "9-3"}, 2, "", "--offset:"},
		{[]string{"dlq", "replay", "--offsets", "0-12"}, 2, "", `--offsets: "0-12" is not partition:offset`},
		{[]string{"dlq", "list", "--partition", "x"}, 2, "", "--partition:"},
		{[]string{"cancel"}, 2, "", "the intent id is required"},
		{[]string{"cancel", "--help"}, 0, "", "switchboard.control=cancel"},
		{[]string{"cancel", "a", "b"}, 2, "", `unexpected argument "b"`},
		{[]string{"cancel", "--reason", "x", "bad id"}, 1, "", `"bad id" is not a valid intent id`},
		{[]string{"cancel", "--tenant", "a b", "i-1"}, 1, "", `--tenant: "a b" is not a valid tenant`},
		{[]string{"cancel", "--help"}, 0, "", "without --tenant it cancels the intent ID that has no tenant"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), tc.args, &out, &errOut)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out.String(), errOut.String())
			}
			if !strings.Contains(out.String(), tc.out) || !strings.Contains(errOut.String(), tc.errOut) {
				t.Fatalf("stdout %q / stderr %q, want %q / %q", out.String(), errOut.String(), tc.out, tc.errOut)
			}
		})
	}
}
