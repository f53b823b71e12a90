package mcp_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/api"
)

// A reload's new catalog (SetCatalog) is what tools/list and tools/call
// serve next, and a session's stream receives
// notifications/tools/list_changed.
func TestSetCatalogNotifiesSessions(t *testing.T) {
	h := newHarness(t, nil)
	sid := h.session(keyAcme)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.ts.URL+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+keyAcme)
	for k, v := range sessionHdr(sid) {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %d", resp.StatusCode)
	}
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

	cat := catalog(t)
	cat.IntentTypes = append(cat.IntentTypes[1:], api.IntentTypeInfo{Name: "summarize", Agent: "echo", TimeoutMs: 9000, Description: "Summarizes."})
	// A notification sent before the server attached the stream is not
	// replayed to it: until one arrives, change the catalog again now and
	// then.
	again := time.NewTicker(50 * time.Millisecond)
	defer again.Stop()
	h.ep.SetCatalog(cat)
	for got := false; !got; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended without notifications/tools/list_changed")
			}
			got = strings.Contains(l, `"notifications/tools/list_changed"`)
		case <-again.C:
			cat.IntentTypes[len(cat.IntentTypes)-1].TimeoutMs++
			h.ep.SetCatalog(cat)
		case <-ctx.Done():
			t.Fatal("no notifications/tools/list_changed after SetCatalog")
		}
	}

	r := h.post(keyAcme, sessionHdr(sid), `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`)
	if !strings.Contains(r.body, `"name":"summarize"`) || strings.Contains(r.body, `"name":"echo"`) || strings.Contains(r.body, "switchboard.list_changed") {
		t.Fatalf("tools/list after SetCatalog: %s", r.body)
	}
	r = h.post(keyAcme, sessionHdr(sid), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	if !strings.Contains(r.body, `unknown tool \"echo\"`) {
		t.Fatalf("tools/call of a removed tool: %s", r.body)
	}
}
