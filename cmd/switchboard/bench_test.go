package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestBenchFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"bench", "--help"}, 0, "Examples:"},
		{[]string{"bench", "--ignore-rate", "1.5"}, 1, "--ignore-rate 1.5 is not between 0 and 1"},
		{[]string{"bench", "--rate", "0"}, 1, "--rate 0 must be more than 0"},
		{[]string{"bench", "--embedded", "--brokers", "x:1"}, 1, "do not go together"},
		{[]string{"bench", "--delivery", "maybe"}, 1, `--delivery "maybe"`},
		{[]string{"bench", "--duration", "2h"}, 1, "at most 25m0s"},
		{[]string{"bench", "--step-up", "--step", "1", "--max-rate", "100000"}, 1, "raise --step"},
		{[]string{"bench", "--bogus"}, 2, "flag provided but not defined"},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), c.args, &out, &errOut)
		if code != c.code || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, errOut.String(), c.code, c.want)
		}
		if strings.Contains(errOut.String(), "goroutine ") {
			t.Errorf("%v: a stack trace reached the user", c.args)
		}
	}
}
