package mcp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioConfig is what [ServeStdio] forwards to.
type StdioConfig struct {
	// URL is the Switchboard MCP endpoint, e.g. https://switchboard.example.com/mcp
	// (a URL without a path gets /mcp).
	URL string
	// Credential is an API key or a JWT, sent as "Authorization: Bearer".
	// Empty: none (a server without authentication).
	Credential string
	// HTTPClient, if set, is used for the requests (tests). Default: a
	// client of its own.
	HTTPClient *http.Client
	Logger     *slog.Logger
	Version    string
}

// ServeStdio serves MCP on in/out (newline-delimited JSON-RPC, as desktop
// clients that launch a local command speak it) and forwards tools/list
// and tools/call, with their progress notifications and cancellation, to
// the Switchboard at cfg.URL. It returns when in closes or ctx ends.
func ServeStdio(ctx context.Context, cfg StdioConfig, in io.ReadCloser, out io.WriteCloser) error {
	if cfg.URL == "" {
		return ErrNoURL
	}
	if !strings.Contains(strings.TrimPrefix(strings.TrimPrefix(cfg.URL, "https://"), "http://"), "/") {
		cfg.URL = strings.TrimSuffix(cfg.URL, "/") + "/mcp"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	if cfg.Credential != "" {
		hc = &http.Client{Transport: bearer{token: cfg.Credential, base: transportOf(hc)}, Timeout: hc.Timeout}
	}
	p := &stdioProxy{tokens: map[string]*sdk.ServerSession{}}
	client := sdk.NewClient(&sdk.Implementation{Name: "switchboard-mcp", Version: cfg.Version}, &sdk.ClientOptions{
		Logger:                      cfg.Logger,
		ProgressNotificationHandler: p.progress,
	})
	remote, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: hc}, nil)
	if err != nil {
		return fmt.Errorf("mcp: connect to %s: %w", cfg.URL, err)
	}
	defer func() { _ = remote.Close() }()
	server := sdk.NewServer(&sdk.Implementation{Name: "switchboard", Title: "Switchboard", Version: cfg.Version}, &sdk.ServerOptions{
		Logger: cfg.Logger, Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}},
	})
	server.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			switch method {
			case "tools/list":
				return remote.ListTools(ctx, &sdk.ListToolsParams{})
			case "tools/call":
				r, ok := req.(*sdk.CallToolRequest)
				if !ok {
					break
				}
				params := &sdk.CallToolParams{Name: r.Params.Name, Arguments: r.Params.Arguments}
				if tok := r.Params.GetProgressToken(); tok != nil {
					params.Meta = sdk.Meta{"progressToken": tok}
					defer p.watch(fmt.Sprint(tok), r.Session)()
				}
				return remote.CallTool(ctx, params) // ctx ends on notifications/cancelled: the SDK cancels upstream
			}
			return next(ctx, method, req)
		}
	})
	return server.Run(ctx, &sdk.IOTransport{Reader: in, Writer: out})
}

// stdioProxy forwards progress notifications from the remote call to the
// local session that made it, by progress token.
type stdioProxy struct {
	mu     sync.Mutex
	tokens map[string]*sdk.ServerSession
}

func (p *stdioProxy) watch(token string, ss *sdk.ServerSession) func() {
	p.mu.Lock()
	p.tokens[token] = ss
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		delete(p.tokens, token)
		p.mu.Unlock()
	}
}

func (p *stdioProxy) progress(ctx context.Context, req *sdk.ProgressNotificationClientRequest) {
	p.mu.Lock()
	ss := p.tokens[fmt.Sprint(req.Params.ProgressToken)]
	p.mu.Unlock()
	if ss != nil {
		_ = ss.NotifyProgress(ctx, req.Params)
	}
}

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

func transportOf(c *http.Client) http.RoundTripper {
	if c.Transport != nil {
		return c.Transport
	}
	return http.DefaultTransport
}
