package api

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// consoleFiles is the web console: plain HTML, CSS and JavaScript, embedded
// in the binary (no build step, nothing fetched from elsewhere).
//
//go:embed console/index.html console/console.js console/console.css
var consoleFiles embed.FS

// consoleCSP keeps the console to its own origin: its scripts and styles
// come from this server, and it talks only to this server's API.
const consoleCSP = "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; frame-ancestors 'none'"

// serveConsole serves GET / (the page) and GET /console/{file}.
func (s *Server) serveConsole(w http.ResponseWriter, r *http.Request) {
	name := "console/index.html"
	if r.URL.Path != "/" {
		name = r.URL.Path[1:]
	}
	b, err := fs.ReadFile(consoleFiles, name)
	if err != nil {
		s.notFound(w, r)
		return
	}
	h := w.Header()
	switch {
	case strings.HasSuffix(name, ".js"):
		h.Set("Content-Type", "text/javascript; charset=utf-8")
	case strings.HasSuffix(name, ".css"):
		h.Set("Content-Type", "text/css; charset=utf-8")
	default:
		h.Set("Content-Type", "text/html; charset=utf-8")
	}
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}
