package config_test

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/mcp"
	"github.com/switchboard-mcp/switchboard/router/config"
)

// The README's reference of every key is held to the loader: the keys it
// lists, the keys the loader accepts, and the defaults either fills in.
const readmeFile = "../../README.md"

// readmeKeysIntro is the sentence that ends just before the block.
const readmeKeysIntro = "Every key, with its default:"

// placeholder is a name the block writes in angle brackets (agents.<name>,
// intents.<intent_type>, topics.overrides.<topic>); the test reads each as
// placeholderName.
var placeholder = regexp.MustCompile(`<[a-z_]+>`)

const placeholderName = "p"

// withEntries is a file with one entry of every map and every optional
// section, so that the loader fills in the defaults of what is inside them.
const withEntries = `
agents: {p: {circuit_breaker: {}}}
intents: {p: {agent: p, retry: {}, fallback: {cache: {}}, annotations: {}}}
topics: {overrides: {p: {}}}
contexts: {publish: {thresholds: {p: {}}}, aggregate: {features: {p: {}}}}
http: {auth: {jwt: {}}}
`

// examples are the keys whose value in the block is an example, not the
// default (what is said in their comment).
var examples = map[string]string{
	"http.admin_listen":                    "absent: not served apart",
	"http.lookup.dir":                      "default: a temporary directory",
	"http.auth.api_keys":                   "a list of keys, none by default",
	"intents.*.agent":                      "required",
	"intents.*.retry.max_retries":          "required when retry is set",
	"intents.*.fallback.cache":             "absent: no cache fallback",
	"intents.*.fallback.static":            "absent: no static answer",
	"contexts.aggregate.events_topic":      "required when aggregate is set",
	"contexts.aggregate.key_field":         "required when aggregate is set",
	"contexts.aggregate.features.*.op":     "required for each feature",
	"contexts.aggregate.features.*.window": "required for each feature",
}

// apiDefaults are the keys the loader leaves 0 for the API to default
// (cmd/switchboard/apiconfig.go and node.go pass them on as they are).
var apiDefaults = map[string]any{
	"http.results_max_bytes":                    api.DefaultResultsMaxBytes,
	"http.max_body_bytes":                       api.DefaultMaxBodyBytes,
	"http.max_header_bytes":                     api.DefaultMaxHeaderBytes,
	"http.read_header_timeout":                  api.DefaultReadHeaderTimeout,
	"http.body_read_timeout":                    api.DefaultBodyReadTimeout,
	"http.idle_timeout":                         api.DefaultIdleTimeout,
	"http.max_connections":                      api.DefaultMaxHTTPConnections,
	"http.auth.public_paths":                    api.DefaultPublicPaths,
	"http.auth.jwt.jwks_refresh":                api.DefaultJWKSRefresh,
	"http.mcp.result_grace":                     mcp.DefaultResultGrace,
	"http.mcp.session_timeout":                  mcp.DefaultSessionTimeout,
	"http.websocket.send_queue":                 api.DefaultSendQueue,
	"http.websocket.send_queue_bytes":           api.DefaultSendQueueBytes,
	"http.websocket.ping_period":                api.DefaultPingPeriod,
	"http.websocket.pong_wait":                  api.DefaultPongWait,
	"http.websocket.write_wait":                 api.DefaultWriteWait,
	"http.websocket.max_message_bytes":          api.DefaultMaxMessageBytes,
	"http.websocket.max_subscriptions":          api.DefaultMaxSubscriptions,
	"http.websocket.message_rate":               api.DefaultMessageRate,
	"http.websocket.message_burst":              api.DefaultMessageBurst,
	"http.websocket.max_connections_per_tenant": api.DefaultMaxConnectionsPerTenant,
	"http.websocket.max_connections":            api.DefaultMaxConnections,
	"http.websocket.max_replays":                api.DefaultMaxReplays,
	"http.websocket.max_replays_per_tenant":     api.DefaultMaxReplaysPerTenant,
}

// accessors are the keys whose absence (a nil pointer) the code reads as a
// default through a method.
var accessors = map[string]func(c *config.Config) any{
	"agents.*.overload.shed_late":          func(c *config.Config) any { o := c.Agents[placeholderName].Overload; return o.ShedsLate() },
	"agents.*.overload.adaptive_in_flight": func(c *config.Config) any { o := c.Agents[placeholderName].Overload; return o.Adapts() },
	"agents.*.demo":                        func(c *config.Config) any { return c.Agents[placeholderName].RunsDemo() },
	"router.abort_hanging_transactions":    func(c *config.Config) any { return c.Router.AbortsHangingTransactions() },
	"http.admission.enabled":               func(c *config.Config) any { return c.HTTP.Admission.On() },
	"telemetry.traces.sample_ratio":        func(c *config.Config) any { return c.Telemetry.Traces.Ratio() },
}

// blockKey is one key of the README's block.
type blockKey struct {
	line  int        // in README.md
	value *yaml.Node // its value as written
	text  string     // the README line it is on
}

// readmeBlock returns README.md's block of every key as YAML, with as many
// empty lines before it as it starts below the top of README.md (so that
// the loader's lines are README.md's), and README.md's lines.
func readmeBlock(t *testing.T) (string, []string) {
	t.Helper()
	b, err := os.ReadFile(readmeFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	start := -1
	for i, l := range lines {
		if strings.Contains(l, readmeKeysIntro) {
			start = i + 1
			for start < len(lines) && lines[start] == "" {
				start++
			}
			break
		}
	}
	if start < 0 || start >= len(lines) || lines[start] != "```yaml" {
		t.Fatalf("README.md: Configuration: no line %q followed by a ```yaml block", readmeKeysIntro)
	}
	end := slices.Index(lines[start+1:], "```")
	if end < 0 {
		t.Fatal("README.md: Configuration: the ```yaml block of every key does not end")
	}
	block := strings.Repeat("\n", start+1) + strings.Join(lines[start+1:start+1+end], "\n") + "\n"
	return block, lines
}

// readmeKeys returns every key of the block by its path, map and list
// entries as "*".
func readmeKeys(t *testing.T) map[string]blockKey {
	t.Helper()
	block, lines := readmeBlock(t)
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(placeholder.ReplaceAllString(block, placeholderName)), &doc); err != nil {
		t.Fatalf("README.md: Configuration: the block is not YAML: %v", err)
	}
	keys := map[string]blockKey{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				name := k.Value
				if name == placeholderName {
					name = "*"
				}
				p := strings.TrimPrefix(path+"."+name, ".")
				if _, dup := keys[p]; !dup {
					keys[p] = blockKey{line: k.Line, value: v, text: lines[k.Line-1]}
				}
				walk(v, p)
			}
		case yaml.SequenceNode:
			for _, item := range n.Content {
				if item.Kind == yaml.MappingNode {
					if _, dup := keys[path+".*"]; !dup {
						keys[path+".*"] = blockKey{line: item.Line, value: item, text: lines[item.Line-1]}
					}
					walk(item, path+".*")
				}
			}
		}
	}
	walk(doc.Content[0], "")
	return keys
}

var unmarshaler = reflect.TypeFor[yaml.Unmarshaler]()

// codeKeys returns every key the loader accepts, map and list entries of
// sections as "*", with its Go type.
func codeKeys() map[string]reflect.Type {
	out := map[string]reflect.Type{}
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		if !section(t) {
			return
		}
		if t = deref(t); t.Kind() != reflect.Struct {
			out[path+".*"] = t.Elem()
			walk(deref(t.Elem()), path+".*")
			return
		}
		for k, ft := range config.YAMLFields(t) {
			p := strings.TrimPrefix(path+"."+k, ".")
			out[p] = ft
			walk(ft, p)
		}
	}
	walk(reflect.TypeFor[config.Config](), "")
	return out
}

// section reports whether a key of type t holds keys of its own.
func section(t reflect.Type) bool {
	t = deref(t)
	if reflect.PointerTo(t).Implements(unmarshaler) {
		return false
	}
	switch t.Kind() {
	case reflect.Struct:
		return true
	case reflect.Map, reflect.Slice:
		e := deref(t.Elem())
		return e.Kind() == reflect.Struct && !reflect.PointerTo(e).Implements(unmarshaler)
	}
	return false
}

// anyValue reports whether k is inside a key that takes any value (a
// static fallback answer).
func anyValue(code map[string]reflect.Type, k string) bool {
	for i := strings.LastIndex(k, "."); i > 0; i = strings.LastIndex(k[:i], ".") {
		if t, ok := code[k[:i]]; ok && t.Kind() == reflect.Interface {
			return true
		}
	}
	return false
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// valueAt is the value at path in c ("*": the entry named placeholderName),
// and false when a section on the way is absent.
func valueAt(c *config.Config, path string) (reflect.Value, bool) {
	v := reflect.ValueOf(c).Elem()
	for _, k := range strings.Split(path, ".") {
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return v, false
			}
			v = v.Elem()
		}
		switch v.Kind() {
		case reflect.Map:
			v = v.MapIndex(reflect.ValueOf(placeholderName))
			if !v.IsValid() {
				return v, false
			}
		case reflect.Struct:
			f, ok := fieldByKey(v, k)
			if !ok {
				return v, false
			}
			v = f
		default:
			return v, false
		}
	}
	return v, true
}

// fieldByKey is the field of struct v whose YAML key is key, inline
// structs included.
func fieldByKey(v reflect.Value, key string) (reflect.Value, bool) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if strings.Contains(","+opts+",", ",inline,") {
			if fv, ok := fieldByKey(v.Field(i), key); ok {
				return fv, true
			}
			continue
		}
		if name == key && f.IsExported() {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

// TestREADMEListsEveryKey holds README.md's block of every key to the
// loader both ways: each key the loader accepts is in the block, and the
// block, read by the strict loader, has no key it refuses.
func TestREADMEListsEveryKey(t *testing.T) {
	keys := readmeKeys(t)
	if len(keys) < 100 {
		t.Fatalf("README.md: Configuration: read only %d keys from the block: did its format change?", len(keys))
	}
	defaults, err := config.DecodeWithDefaults("with entries", []byte(withEntries))
	if err != nil {
		t.Fatal(err)
	}
	code := codeKeys()
	var problems []string
	for k := range code {
		if _, ok := keys[k]; !ok {
			def := "a section"
			if v, ok := valueAt(defaults, k); !section(code[k]) {
				def = "none"
				if ok {
					def = show(v)
				}
			}
			problems = append(problems, fmt.Sprintf("README.md: Configuration: key %s is missing (default %s): add it to the block of every key", k, def))
		}
	}
	for k, bk := range keys {
		if _, ok := code[k]; !ok && !anyValue(code, k) {
			problems = append(problems, fmt.Sprintf("README.md:%d: Configuration: key %s is not a key the loader accepts: remove it, or fix its spelling or indentation", bk.line, k))
		}
	}
	block, _ := readmeBlock(t)
	if _, err := config.DecodeWithDefaults("README.md", []byte(placeholder.ReplaceAllString(block, placeholderName))); err != nil {
		for _, l := range strings.Split(err.Error(), "\n") {
			problems = append(problems, "the strict loader refuses the block: "+l)
		}
	}
	report(t, problems)
}

// TestREADMEDefaultsAreTheLoaders checks that each value in README.md's
// block of every key is what the loader fills in for a file without it (or,
// where the loader leaves 0, what the API or a method makes of that), except
// the examples, and that the keys derived from router.memory_limit_bytes say
// so.
func TestREADMEDefaultsAreTheLoaders(t *testing.T) {
	keys := readmeKeys(t)
	c, err := config.DecodeWithDefaults("with entries", []byte(withEntries))
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	listed := map[string]bool{}
	for k := range apiDefaults {
		listed[k] = true
	}
	for k := range accessors {
		listed[k] = true
	}
	for k := range derivedDefaults {
		listed[k] = true
	}
	for k := range listed {
		if _, ok := valueAt(c, k); !ok {
			problems = append(problems, fmt.Sprintf("router/config/readme_test.go: key %s is not a key of the loader any more: remove it from the test's lists", k))
		}
	}
	for k := range examples {
		if _, ok := keys[k]; !ok {
			problems = append(problems, fmt.Sprintf("router/config/readme_test.go: examples: key %s is not in README.md's block any more: remove it from examples", k))
		}
	}
	for k, bk := range keys {
		if example(k) || bk.value.Kind == yaml.MappingNode && bk.value.Style != yaml.FlowStyle {
			continue // an example, or a section whose keys are checked one by one
		}
		got, ok := valueAt(c, k)
		if !ok || section(got.Type()) {
			continue // not a key of the loader (the other test says so), or a section
		}
		want := reflect.New(got.Type())
		if err := bk.value.Decode(want.Interface()); err != nil {
			problems = append(problems, fmt.Sprintf("README.md:%d: Configuration: key %s: its value does not read as %s", bk.line, k, got.Type()))
			continue
		}
		if same(want.Elem(), got) {
			continue
		}
		effective, from := got, "the loader's default"
		if f, ok := accessors[k]; ok {
			effective, from = reflect.ValueOf(f(c)), "the code's default (a method of config)"
		} else if d, ok := apiDefaults[k]; ok && got.IsZero() {
			effective, from = reflect.ValueOf(d), "the API's default"
		}
		if sameLoose(want.Elem(), effective) {
			continue
		}
		problems = append(problems, fmt.Sprintf("README.md:%d: Configuration: key %s says %s, %s is %s: fix the block (or the default, if the block is right)",
			bk.line, k, show(want.Elem()), from, show(effective)))
	}

	problems = append(problems, derivedProblems(t, keys, c)...)

	// The process budget the defaults imply, which 'serve' logs.
	m := c.Memory()
	implied := fmt.Sprintf("%d MiB by default", (m.GoLimit+m.OutsideGo)>>20)
	if bk := keys["router.memory_limit_bytes"]; !strings.Contains(bk.text, implied) {
		problems = append(problems, fmt.Sprintf("README.md:%d: Configuration: key router.memory_limit_bytes must say the budget the defaults imply: %q", bk.line, implied))
	}
	report(t, problems)
}

// derivedDefaults are the keys whose default follows another key's value
// when the file leaves them unset: their comment in the block names that
// key, and setting it (to the value given) changes theirs.
var derivedDefaults = map[string]struct {
	from string
	set  any
}{
	"intents.*.timeout":                   {"router.default_timeout", "7s"},
	"intents.*.context_max_age":           {"contexts.max_age", "7s"},
	"contexts.aggregate.features.*.hop":   {"contexts.aggregate.features.*.window", "7s"},
	"router.max_pending_bytes_per_tenant": {"router.max_pending_bytes", 32 << 20},
	"http.max_waiting_per_tenant":         {"http.max_waiting", 100},
	"http.max_waiting_bytes_per_tenant":   {"http.max_waiting_bytes", 32 << 20},
	"http.max_reading_bytes_per_tenant":   {"http.max_reading_bytes", 32 << 20},
	"http.mcp.max_sessions_per_tenant":    {"http.mcp.max_sessions", 100},
	"router.max_pending_bytes":            {"router.memory_limit_bytes", 256 << 20},
	"http.max_waiting_bytes":              {"router.memory_limit_bytes", 256 << 20},
	"http.max_reading_bytes":              {"router.memory_limit_bytes", 256 << 20},
	"http.results_max_bytes":              {"router.memory_limit_bytes", 256 << 20},
	"http.lookup.cache_mb":                {"router.memory_limit_bytes", 256 << 20},
	"http.websocket.send_queue_bytes":     {"router.memory_limit_bytes", 256 << 20},
}

// derivedProblems checks derivedDefaults against the block and the loader,
// and that every key router.memory_limit_bytes derives (Memory().Derived)
// is listed, and no other key's comment says it depends on that budget.
func derivedProblems(t *testing.T, keys map[string]blockKey, base *config.Config) []string {
	t.Helper()
	var problems []string
	for k, d := range derivedDefaults {
		bk, ok := keys[k]
		if !ok {
			continue // TestREADMEListsEveryKey says so
		}
		last := d.from[strings.LastIndex(d.from, ".")+1:]
		if !regexp.MustCompile(`\b` + last + `\b`).MatchString(comment(bk.text)) {
			problems = append(problems, fmt.Sprintf("README.md:%d: Configuration: key %s's default is derived from %s: its comment must say so", bk.line, k, d.from))
		}
		c, err := config.DecodeWithDefaults("with "+d.from, withEntriesSetting(t, d.from, d.set))
		if err != nil {
			t.Fatal(err)
		}
		was, _ := valueAt(base, k)
		now, _ := valueAt(c, k)
		if reflect.DeepEqual(was.Interface(), now.Interface()) {
			problems = append(problems, fmt.Sprintf("router/config/readme_test.go: derivedDefaults: key %s stays %s when %s is %v: it is not derived from it any more", k, show(now), d.from, d.set))
		}
	}
	budget, err := config.DecodeWithDefaults("with a budget", withEntriesSetting(t, "router.memory_limit_bytes", 1<<30))
	if err != nil {
		t.Fatal(err)
	}
	derived := budget.Memory().Derived
	for _, k := range derived {
		if derivedDefaults[k].from != "router.memory_limit_bytes" {
			problems = append(problems, fmt.Sprintf("router/config/readme_test.go: derivedDefaults: key %s is derived from router.memory_limit_bytes: list it", k))
		}
	}
	for k, bk := range keys {
		if strings.Contains(comment(bk.text), "memory_limit_bytes") && k != "router.memory_limit_bytes" && !slices.Contains(derived, k) {
			problems = append(problems, fmt.Sprintf("README.md:%d: Configuration: key %s's comment says it depends on router.memory_limit_bytes, but the loader derives only %s", bk.line, k, strings.Join(derived, ", ")))
		}
	}
	return problems
}

// withEntriesSetting is withEntries with key set to v.
func withEntriesSetting(t *testing.T, key string, v any) []byte {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(withEntries), &doc); err != nil {
		t.Fatal(err)
	}
	m := doc
	parts := strings.Split(strings.ReplaceAll(key, "*", placeholderName), ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// example reports whether key k or a section it is in is an example.
func example(k string) bool {
	for p := k; ; {
		if _, ok := examples[p]; ok {
			return true
		}
		i := strings.LastIndex(p, ".")
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

// comment is the part of a README line after its "# ".
func comment(line string) string {
	if i := strings.Index(line, " # "); i >= 0 {
		return line[i:]
	}
	return ""
}

// same compares a value read from the block with one in a Config: absent
// and empty lists and maps are the same.
func same(a, b reflect.Value) bool {
	if (a.Kind() == reflect.Map || a.Kind() == reflect.Slice) && a.Len() == 0 && b.Len() == 0 {
		return true
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

// sameLoose is same across types: the block's value against a default held
// as another type (an API constant, a method's result).
func sameLoose(want, got reflect.Value) bool {
	for want.Kind() == reflect.Pointer && !want.IsNil() {
		want = want.Elem()
	}
	if got.Type().ConvertibleTo(want.Type()) && got.Kind() != reflect.Slice {
		return reflect.DeepEqual(want.Interface(), got.Convert(want.Type()).Interface())
	}
	return same(want, got)
}

// show formats a value of the configuration as the block writes it.
func show(v reflect.Value) string {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "absent"
		}
		v = v.Elem()
	}
	if d, ok := v.Interface().(config.Duration); ok {
		return d.String()
	}
	if d, ok := v.Interface().(time.Duration); ok {
		return d.String()
	}
	if v.Kind() == reflect.String {
		return fmt.Sprintf("%q", v.String())
	}
	return fmt.Sprint(v.Interface())
}

func report(t *testing.T, problems []string) {
	t.Helper()
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}
