package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var (
	// cliMentionRE is "switchboard COMMAND [SUBCOMMAND] REST" in README.md,
	// REST up to the end of a code span, a table cell or a shell comment.
	cliMentionRE = regexp.MustCompile("(?:^|[\\s`(/])switchboard ([a-z]+)((?: [a-z]+)?)([^`\\n|#]*)")
	cliFlagRE    = regexp.MustCompile(`(?:^|[\s\[(])(--?[a-z][a-z0-9-]*)`)
)

// TestREADMECommandLines checks README.md's command lines against the
// binary's help: every command README names exists and is named, and every
// flag a command line in README gives is one its help lists.
func TestREADMECommandLines(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{"version": true, "help": true}
	for _, c := range commands {
		known[c.name] = true
	}
	helps := map[string]string{}
	help := func(args ...string) (string, bool) {
		key := strings.Join(args, " ")
		if h, ok := helps[key]; ok {
			return h, h != ""
		}
		var out syncBuffer
		if code := run(context.Background(), append(args, "--help"), &out, &out); code != 0 {
			helps[key] = ""
			return "", false
		}
		helps[key] = out.String()
		return helps[key], true
	}
	named := map[string]bool{}
	var problems []string
	checked := 0
	for i, line := range strings.Split(string(b), "\n") {
		for _, m := range cliMentionRE.FindAllStringSubmatch(line, -1) {
			cmd, sub, rest := m[1], strings.TrimSpace(m[2]), m[3]
			if !known[cmd] {
				continue // prose: "switchboard routes ...", a module path
			}
			named[cmd] = true
			args := []string{cmd}
			out, _ := help(cmd)
			// A subcommand is one its command's help lists; any other word
			// is prose, never passed to the command (it could run).
			if sub != "" && regexp.MustCompile(`(?m)^  `+sub+`\s`).MatchString(out) {
				subOut, ok := help(cmd, sub)
				if !ok {
					problems = append(problems, fmt.Sprintf("README.md:%d: switchboard %s %s --help fails", i+1, cmd, sub))
				}
				args, out = append(args, sub), subOut
			}
			for _, f := range cliFlagRE.FindAllStringSubmatch(rest, -1) {
				name := strings.TrimLeft(f[1], "-")
				checked++
				if !regexp.MustCompile(`(?m)^  -` + regexp.QuoteMeta(name) + `(\s|$)`).MatchString(out) {
					problems = append(problems, fmt.Sprintf("README.md:%d: switchboard %s has no flag %s ('switchboard %s --help' lists its flags): fix the README or the flag", i+1, strings.Join(args, " "), f[1], strings.Join(args, " ")))
				}
			}
		}
	}
	for _, c := range commands {
		if !named[c.name] {
			problems = append(problems, fmt.Sprintf("README.md: switchboard %s is never named: say what it is for", c.name))
		}
	}
	if checked < 30 {
		t.Fatalf("checked only %d flags in README.md's command lines: did the format change?", checked)
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}
