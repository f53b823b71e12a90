package mcp_test

import (
	"context"
	"io"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/api/mcp"
)

// TestStdioForwards: a client speaking stdio to ServeStdio lists the
// remote's tools and calls one, with the credential forwarded.
func TestStdioForwards(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- mcp.ServeStdio(ctx, mcp.StdioConfig{URL: h.ts.URL, Credential: keyAcme}, sr, sw) }()
	c := sdk.NewClient(&sdk.Implementation{Name: "desktop", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 4 {
		t.Fatalf("tools %v %v", tools, err)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"via": "stdio"}})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "stdio") {
		t.Fatalf("call %+v %v", res, err)
	}
	if r := h.pub.Requests(); len(r) != 1 || *r[0].Tenant != "acme" {
		t.Fatalf("published %+v", r)
	}
	_ = cs.Close()
	cancel()
	if err := <-done; err != nil {
		t.Logf("ServeStdio ended with %v", err) // ctx ended: any error is its
	}
}
