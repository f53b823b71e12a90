package main

import (
	"context"
	"io"
	"os"

	"github.com/switchboard-mcp/switchboard/api/mcp"
)

// Environment of 'switchboard mcp'.
const (
	envMCPURL        = "SWITCHBOARD_URL"
	envMCPCredential = "SWITCHBOARD_API_KEY"
	envMCPToken      = "SWITCHBOARD_TOKEN"
)

func runMCP(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := newFlags("mcp", "[--url URL]", `
Serve the Model Context Protocol on stdin/stdout and forward every call to
a Switchboard: for desktop MCP clients that only launch local commands.
Every intent type of that Switchboard is a tool; calls, their progress and
their cancellation go to its /mcp endpoint.

The credential comes from the environment, never the command line:
`+envMCPCredential+` (an API key) or `+envMCPToken+` (a JWT). The URL is --url
or `+envMCPURL+`. Logs go to stderr.`, `  SWITCHBOARD_API_KEY=... switchboard mcp --url https://switchboard.example.com
  switchboard mcp --url http://127.0.0.1:8080   (switchboard dev)`, stderr)
	url := fs.String("url", os.Getenv(envMCPURL), "the Switchboard `URL` (its /mcp endpoint, or the server's root)")
	if err := parse(fs, args); err != nil {
		return err
	}
	cred := os.Getenv(envMCPCredential)
	if cred == "" {
		cred = os.Getenv(envMCPToken)
	}
	return mcp.ServeStdio(ctx, mcp.StdioConfig{
		URL: *url, Credential: cred, Version: version(),
		Logger: newLogger(stderr, "warn", "text"),
	}, os.Stdin, os.Stdout)
}
