package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"
)

const usage = `switchboard routes AI agents' intents over Apache Kafka.

Usage:
  switchboard <command> [flags]

Commands:
  dev      run everything on an embedded broker, with demo agents (no Kafka needed)
  serve    run the router and the HTTP/WebSocket API against a Kafka cluster
  send     publish one intent, and optionally wait for its result
  cancel   cancel a pending intent
  lookup   print an intent's result and timeline, or its pending state, from any instance
  tail     print the records of the results, timeouts or dead-letter topic
  dlq      list the dead-letter topic, and replay records from it after a fix
  agent    run a demo agent that answers intents
  topics   create or check the topics a configuration uses
  context  publish entity features (context snapshots), or aggregate them from events
  bench    measure throughput and latency under an open-loop load
  mcp      serve MCP on stdin/stdout, forwarding to a Switchboard (desktop clients)
  version  print the version

Run 'switchboard <command> --help' for a command's flags.

Start here:
  switchboard dev
  switchboard send --type echo --payload '{"q":1}' --wait 5s
`

type command struct {
	name string
	run  func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = []command{
	{"dev", runDev},
	{"serve", runServe},
	{"send", runSend},
	{"cancel", runCancel},
	{"lookup", runLookup},
	{"dlq", runDLQ},
	{"tail", runTail},
	{"agent", runAgent},
	{"topics", runTopics},
	{"context", runContext},
	{"bench", runBench},
	{"mcp", runMCP},
}

// errUsage means the flags were wrong; the flag package already said why.
var errUsage = errors.New("usage")

// run dispatches to a subcommand and turns its error into an exit code: 0
// success, 1 failure, 2 wrong usage.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case "version", "--version":
		fmt.Fprintln(stdout, "switchboard", version())
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		case ctx.Err() != nil && errors.Is(err, context.Canceled):
			// SIGINT or SIGTERM before the command finished (say, while
			// serve waited for a broker): that is what ended it, not the
			// step it was on, and 130 is what a shell reports for it.
			fmt.Fprintf(stderr, "switchboard %s: interrupted before it finished (%v)\n", c.name, err)
			return 130
		default:
			fmt.Fprintf(stderr, "switchboard %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "switchboard: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// newFlags makes a flag set whose --help prints the command's synopsis, what
// it does, its flags and examples.
func newFlags(name, synopsis, about, examples string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: switchboard %s %s\n\n%s\n\nFlags:\n", name, synopsis, strings.TrimSpace(about))
		fs.PrintDefaults()
		if examples != "" {
			fmt.Fprintf(stderr, "\nExamples:\n%s\n", strings.TrimRight(examples, "\n"))
		}
	}
	return fs
}

// parse parses flags and maps the flag package's errors to ours.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	return nil
}

func newLogger(w io.Writer, level, format string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: l}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// version is the module version the Go toolchain stamped into the binary
// (make build and go install stamp one: a tag, or a pseudo-version naming
// the commit), else "(devel)" and the commit when the build knows it. It is
// never "dev", which reads as the command of that name.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	rev, modified := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return "(devel)"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified {
		rev += "+dirty"
	}
	return "(devel) " + rev
}
