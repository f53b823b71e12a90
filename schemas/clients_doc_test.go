package schemas

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// clientsDoc is the client guide whose record tables must match the schemas.
const clientsDoc = "../docs/CLIENTS.md"

// docField is a field as the guide's table for its record states it.
type docField struct {
	name     string
	required bool
}

// avscRecords returns every record schema in the .avsc files of this
// directory, top-level and nested, by name, with its fields in order.
func avscRecords(t *testing.T) map[string][]docField {
	t.Helper()
	files, err := filepath.Glob("*.avsc")
	if err != nil || len(files) == 0 {
		t.Fatalf("no .avsc files: %v", err)
	}
	records := map[string][]docField{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			if x["type"] == "record" {
				name, _ := x["name"].(string)
				fields, _ := x["fields"].([]any)
				var fs []docField
				for _, f := range fields {
					fm, _ := f.(map[string]any)
					fname, _ := fm["name"].(string)
					union, isUnion := fm["type"].([]any)
					_, hasDefault := fm["default"]
					optional := isUnion && hasDefault && fm["default"] == nil && slices.Contains(union, any("null"))
					fs = append(fs, docField{name: fname, required: !optional})
					walk(fm["type"])
				}
				records[name] = fs
				return
			}
			for _, e := range x {
				walk(e)
			}
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		walk(v)
	}
	return records
}

var (
	docHeading  = regexp.MustCompile("^### ([A-Za-z]+)$")
	docRow      = regexp.MustCompile("^\\| `([a-z_]+)` \\| [^|]+ \\| (yes|no) \\|")
	docInternal = regexp.MustCompile(`^Internal records \(not for clients\): (.*)\. `)
)

// clientsDocTables returns the guide's field table of each record (its "###
// Name" section) and the records it names as internal.
func clientsDocTables(t *testing.T) (map[string][]docField, []string) {
	t.Helper()
	b, err := os.ReadFile(clientsDoc)
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string][]docField{}
	var internal []string
	current := ""
	for _, line := range strings.Split(string(b), "\n") {
		if m := docHeading.FindStringSubmatch(line); m != nil {
			current = m[1]
			if _, dup := tables[current]; dup {
				t.Errorf("%s: two sections for %s", clientsDoc, current)
			}
			tables[current] = nil
			continue
		}
		if strings.HasPrefix(line, "## ") {
			current = ""
		}
		if m := docInternal.FindStringSubmatch(line); m != nil {
			for _, n := range strings.Split(m[1], ",") {
				internal = append(internal, strings.TrimSpace(n))
			}
		}
		if m := docRow.FindStringSubmatch(line); m != nil && current != "" {
			tables[current] = append(tables[current], docField{name: m[1], required: m[2] == "yes"})
		}
	}
	return tables, internal
}

// TestClientsDocMatchesSchemas keeps docs/CLIENTS.md true: every field of
// every record schema is in the table for its record, with "required" as the
// schema has it (no default), and no table names a field, or a record, the
// schemas lack. Records the guide calls internal need no table.
func TestClientsDocMatchesSchemas(t *testing.T) {
	records := avscRecords(t)
	tables, internal := clientsDocTables(t)
	for name, fields := range records {
		doc, ok := tables[name]
		if !ok {
			if !slices.Contains(internal, name) {
				t.Errorf("%s: no \"### %s\" section with a field table, and not listed as internal", clientsDoc, name)
			}
			continue
		}
		inDoc := map[string]docField{}
		for _, f := range doc {
			if _, dup := inDoc[f.name]; dup {
				t.Errorf("%s: %s: field %q listed twice", clientsDoc, name, f.name)
			}
			inDoc[f.name] = f
		}
		inSchema := map[string]bool{}
		for _, f := range fields {
			inSchema[f.name] = true
			d, ok := inDoc[f.name]
			switch {
			case !ok:
				t.Errorf("%s: %s: field %q of the schema is missing from its table", clientsDoc, name, f.name)
			case d.required != f.required:
				t.Errorf("%s: %s.%s: the table says required=%t, the schema %t", clientsDoc, name, f.name, d.required, f.required)
			}
		}
		for _, f := range doc {
			if !inSchema[f.name] {
				t.Errorf("%s: %s: the table names %q, which the schema lacks", clientsDoc, name, f.name)
			}
		}
	}
	for name := range tables {
		if _, ok := records[name]; !ok {
			t.Errorf("%s: a section for %s, which no schema defines", clientsDoc, name)
		}
	}
	for _, name := range internal {
		if _, ok := records[name]; !ok {
			t.Errorf("%s: lists %s as internal, which no schema defines", clientsDoc, name)
		}
	}
}
