package client

import (
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestImportsNoEngine fails when the client, or any package of this module
// it imports however indirectly, imports the router (the engine): the Go
// client for agents and publishers describes records with router/port and
// reads and writes Kafka with router/kafkaio, which import the engine no
// more than it does. Test files do not count (they may run a router).
func TestImportsNoEngine(t *testing.T) {
	const module = "github.com/switchboard-mcp/switchboard"
	const engine = module + "/router"
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module root is not two levels up: %v", err)
	}
	// path -> the package that imported it first, to name the chain.
	from := map[string]string{module + "/intents/client": ""}
	queue := []string{module + "/intents/client"}
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		pkg, err := build.Default.ImportDir(filepath.Join(root, strings.TrimPrefix(path, module)), 0)
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		for _, imp := range pkg.Imports {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			if _, seen := from[imp]; seen {
				continue
			}
			from[imp] = path
			if imp == engine {
				chain := []string{imp}
				for p := path; p != ""; p = from[p] {
					chain = append(chain, p)
				}
				slices.Reverse(chain)
				t.Fatalf("the client imports the engine: %s", strings.Join(chain, " -> "))
			}
			queue = append(queue, imp)
		}
	}
	if len(from) < 3 {
		t.Fatalf("walked only %d packages: the walk is broken", len(from))
	}
}
