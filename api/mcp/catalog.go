package mcp

import (
	"bytes"
	"encoding/json"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/api"
)

// listChangedProbe is the name of a tool that is added and removed at once
// to make the SDK send notifications/tools/list_changed: its tool list is
// never served (tools/list and tools/call are the endpoint's, tools.go), and
// its AddTool and RemoveTools are the SDK's only way to send the
// notification to every session (debounced into one).
const listChangedProbe = "switchboard.list_changed"

// catalog is the catalog in force: Config.Catalog, or what SetCatalog set.
func (e *Endpoint) catalog() *api.Catalog { return e.tools.Load() }

// SetCatalog replaces the tools (intent types) the endpoint lists and
// accepts, and the input schemas it enforces: a configuration reload. Calls
// being served finish with the catalog they started with. When what
// tools/list shows changes (a tool added or removed, a description, a
// schema, a timeout), every session is sent
// notifications/tools/list_changed. Safe for concurrent use.
func (e *Endpoint) SetCatalog(c api.Catalog) {
	old := e.tools.Swap(&c)
	if old != nil && sameTools(old, &c) {
		return
	}
	e.server.AddTool(&sdk.Tool{Name: listChangedProbe, InputSchema: anyObject}, nil)
	e.server.RemoveTools(listChangedProbe)
}

// sameTools reports whether a and b describe the same tools.
func sameTools(a, b *api.Catalog) bool {
	ja, errA := json.Marshal(a.IntentTypes)
	jb, errB := json.Marshal(b.IntentTypes)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
