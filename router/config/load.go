package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Error is a configuration mistake: the file, the line (0 when unknown), the
// dotted key path, and what is wrong.
type Error struct {
	File string
	Line int
	Key  string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrInvalid is wrapped by every configuration error.
var ErrInvalid = errors.New("config: invalid configuration")

// Unwrap lets errors.Is(err, ErrInvalid) match.
func (e *Error) Unwrap() error { return ErrInvalid }

// Errors is every mistake found in one file, in file order.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap exposes each mistake to errors.Is and errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Load reads, overrides from the environment, defaults and validates the file
// at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(path, data, os.LookupEnv)
}

// Parse is Load on data already read. name is used in messages; lookupEnv
// (os.LookupEnv, or nil for none) supplies the overrides.
func Parse(name string, data []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	c, err := decode(name, data)
	if err != nil {
		return nil, err
	}
	c.applyEnv(lookupEnv)
	c.setDefaults()
	if errs := c.validate(c.root); len(errs) > 0 {
		sort.SliceStable(errs, func(i, j int) bool { return errs[i].Line < errs[j].Line })
		return nil, errs
	}
	return c, nil
}

// decode reads data strictly (one document, known keys, values of their
// fields' types) into a Config without defaults.
func decode(name string, data []byte) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(name, &root, err)
	}
	if err := oneDocument(name, data); err != nil {
		return nil, err
	}
	if errs := checkShape(name, &root, reflect.TypeFor[Config]()); len(errs) > 0 {
		return nil, errs
	}
	c := &Config{file: name, root: &root}
	if len(bytes.TrimSpace(data)) > 0 {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
			return nil, yamlError(name, &root, err)
		}
	}
	return c, nil
}

// oneDocument refuses a file holding more than one YAML document: everything
// after the first '---' would be silently ignored.
func oneDocument(name string, data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var first, second yaml.Node
	if err := dec.Decode(&first); err != nil {
		return nil // empty, or a syntax error reported by the caller's parse
	}
	switch err := dec.Decode(&second); {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return yamlError(name, &first, err)
	}
	return Errors{{File: name, Line: second.Line, Msg: "a second YAML document starts here ('---'); Switchboard reads one document per file: merge it into the first or remove the '---'"}}
}

// Env variables that override the file.
const (
	EnvBootstrap      = "SWITCHBOARD_KAFKA_BOOTSTRAP_SERVERS"
	EnvRegistryURL    = "SWITCHBOARD_SCHEMA_REGISTRY_URL"
	EnvSASLUsername   = "SWITCHBOARD_KAFKA_SASL_USERNAME"
	EnvSASLPassword   = "SWITCHBOARD_KAFKA_SASL_PASSWORD"
	EnvRegistryUser   = "SWITCHBOARD_SCHEMA_REGISTRY_USERNAME"
	EnvRegistrySecret = "SWITCHBOARD_SCHEMA_REGISTRY_PASSWORD"
	EnvInstanceID     = "SWITCHBOARD_INSTANCE_ID"
)

func (c *Config) applyEnv(lookup func(string) (string, bool)) {
	if lookup == nil {
		return
	}
	set := func(env string, dst *string) {
		if v, ok := lookup(env); ok && v != "" {
			*dst = v
		}
	}
	set(EnvBootstrap, &c.Kafka.BootstrapServers)
	set(EnvRegistryURL, &c.SchemaRegistry.URL)
	set(EnvRegistryUser, &c.SchemaRegistry.Username)
	set(EnvRegistrySecret, &c.SchemaRegistry.Password)
	set(EnvInstanceID, &c.Router.InstanceID)
	for env, prop := range map[string]string{EnvSASLUsername: "sasl.username", EnvSASLPassword: "sasl.password"} {
		if v, ok := lookup(env); ok && v != "" {
			if c.Kafka.Properties == nil {
				c.Kafka.Properties = map[string]string{}
			}
			c.Kafka.Properties[prop] = v
		}
	}
}

// Defaults, in one place.
const (
	DefaultBootstrap   = "localhost:9092"
	DefaultGroupID     = "switchboard-router"
	DefaultRequests    = "mcp.intent.request"
	DefaultResponses   = "mcp.agent.response"
	DefaultTimeouts    = "mcp.intent.timeout"
	DefaultResults     = "mcp.intent.result"
	DefaultDeadLetter  = "mcp.intent.dlq"
	DefaultPending     = "mcp.router.pending"
	DefaultFallback    = "mcp.fallback.cache"
	DefaultSnapshots   = "mcp.context.snapshot"
	DefaultProgress    = "mcp.intent.progress"
	DefaultRetention   = 7 * 24 * 60 * 60e9
	DefaultMaxMessage  = 1 << 20
	DefaultPartitions  = 6
	DefaultListen      = "127.0.0.1:8080"
	DefaultMaxPending  = 1_000_000
	DefaultCacheSize   = 100_000
	DefaultResultsKept = 100_000
	// DefaultAgentGroupPrefix + the agent's name is an agent's consumer
	// group unless agents.<name>.group_id says otherwise.
	DefaultAgentGroupPrefix = "switchboard-agent-"
	DefaultLagInterval      = 15 * 1e9
)

func (c *Config) setDefaults() {
	def := func(dst *string, v string) {
		if *dst == "" {
			*dst = v
		}
	}
	defD := func(dst *Duration, v Duration) {
		if *dst == 0 {
			*dst = v
		}
	}
	defI := func(dst *int, v int) {
		if *dst == 0 {
			*dst = v
		}
	}
	def(&c.Kafka.BootstrapServers, DefaultBootstrap)
	def(&c.Kafka.GroupID, DefaultGroupID)
	def(&c.Topics.Requests, DefaultRequests)
	def(&c.Topics.Responses, DefaultResponses)
	def(&c.Topics.Timeouts, DefaultTimeouts)
	def(&c.Topics.Results, DefaultResults)
	def(&c.Topics.DeadLetter, DefaultDeadLetter)
	def(&c.Topics.Pending, DefaultPending)
	def(&c.Topics.FallbackCache, DefaultFallback)
	def(&c.Topics.ContextSnapshots, DefaultSnapshots)
	def(&c.Topics.Progress, DefaultProgress)
	defD(&c.Topics.Retention, Duration(DefaultRetention))
	defI(&c.Topics.MaxMessageBytes, DefaultMaxMessage)
	defI(&c.Topics.Partitions, DefaultPartitions)
	defI(&c.Topics.ReplicationFactor, 1)
	def(&c.Router.Delivery, ExactlyOnce)
	defD(&c.Router.CommitInterval, Duration(100e6))
	defD(&c.Router.DefaultTimeout, Duration(30e9))
	defD(&c.Router.Tick, Duration(5e6))
	defI(&c.Router.MaxPending, DefaultMaxPending)
	defD(&c.Router.DedupWindow, Duration(10*60e9))
	defI(&c.Router.FallbackCacheSize, DefaultCacheSize)
	defD(&c.Router.LagInterval, Duration(DefaultLagInterval))
	def(&c.HTTP.Listen, DefaultListen)
	defD(&c.HTTP.MaxWait, Duration(60e9))
	defI(&c.HTTP.Results, DefaultResultsKept)
	c.setMemoryDefaults() // before the budgets', http's and the lookup store's: it derives theirs
	c.setHTTPDefaults()
	c.setBudgetDefaults()
	c.setLookupDefaults()
	c.setAdmissionDefaults()
	def(&c.Log.Level, "info")
	def(&c.Log.Format, "text")
	for name, a := range c.Agents {
		if a == nil {
			a = &Agent{}
			c.Agents[name] = a
		}
		a.Name = name
		def(&a.Topic, "mcp.agent."+name+".request")
		def(&a.GroupID, DefaultAgentGroupPrefix+name)
	}
	for name, it := range c.Intents {
		if it == nil {
			it = &IntentType{}
			c.Intents[name] = it
		}
		it.Name = name
		defD(&it.Timeout, c.Router.DefaultTimeout)
		if it.Fallback.Cache != nil {
			def(&it.Fallback.Cache.Key, CacheKeyContextRef)
		}
	}
	c.setPressureDefaults()
	c.setContextDefaults()
	c.setProgressDefaults()
}

// ownedProperties are librdkafka settings the router sets itself: passing them
// through would break its delivery guarantees or its partitioning.
var ownedProperties = map[string]string{
	"enable.auto.commit":            "the router commits offsets only after what a record caused is delivered",
	"enable.auto.offset.store":      "the router stores offsets only after what a record caused is delivered",
	"isolation.level":               "the router reads read_committed",
	"transactional.id":              "the router owns its transactions",
	"group.id":                      "set kafka.group_id instead",
	"group.instance.id":             "set router.instance_id instead",
	"bootstrap.servers":             "set kafka.bootstrap_servers instead",
	"partitioner":                   "intent-keyed topics use murmur2_random, the Java client's partitioner, so that topics stay co-partitioned",
	"partition.assignment.strategy": "the router uses the range assignor so the owner of a request also receives its response",
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`)

func (c *Config) validate(root *yaml.Node) Errors {
	var errs Errors
	add := func(msg string, path ...string) {
		errs = append(errs, &Error{File: c.file, Line: lineOf(root, path...), Key: strings.Join(path, "."), Msg: msg})
	}
	if strings.TrimSpace(c.Kafka.BootstrapServers) == "" {
		add("required: host:port of at least one broker", "kafka", "bootstrap_servers")
	}
	for k := range c.Kafka.Properties {
		if why, ok := ownedProperties[k]; ok {
			add(fmt.Sprintf("%q cannot be set here: %s", k, why), "kafka", "properties", k)
		}
	}
	topics := map[string]string{}
	for _, t := range []struct{ key, v string }{
		{"requests", c.Topics.Requests},
		{"responses", c.Topics.Responses},
		{"timeouts", c.Topics.Timeouts},
		{"results", c.Topics.Results},
		{"dead_letter", c.Topics.DeadLetter},
		{"pending", c.Topics.Pending},
		{"fallback_cache", c.Topics.FallbackCache},
		{"context_snapshots", c.Topics.ContextSnapshots},
		{"progress", c.Topics.Progress},
	} {
		if other, dup := topics[t.v]; dup {
			add(fmt.Sprintf("topic %q is also topics.%s: each role needs its own topic", t.v, other), "topics", t.key)
		}
		topics[t.v] = t.key
	}
	checkRange(add, c.Topics.Partitions, 1, math.MaxInt32, "topics", "partitions")
	checkRange(add, c.Topics.ReplicationFactor, 1, math.MaxInt16, "topics", "replication_factor")
	checkRange(add, c.Topics.MaxMessageBytes, 1024, math.MaxInt32, "topics", "max_message_bytes")
	errs = append(errs, c.validateTopicNames(root)...)
	errs = append(errs, c.validateOverrides(root)...)
	errs = append(errs, c.validateHTTP()...)
	if c.SchemaRegistry.URL != "" && !strings.HasPrefix(c.SchemaRegistry.URL, "http://") && !strings.HasPrefix(c.SchemaRegistry.URL, "https://") {
		add(fmt.Sprintf("%q is not an http:// or https:// URL", c.SchemaRegistry.URL), "schema_registry", "url")
	}
	if len(c.Intents) == 0 {
		add("no intent types configured: add at least one under intents, e.g. echo: {agent: echo, timeout: 2s}", "intents")
	}
	agentNames := make([]string, 0, len(c.Agents))
	for name, a := range c.Agents {
		agentNames = append(agentNames, name)
		if !nameRE.MatchString(name) {
			add("agent names use a-z, 0-9, '_', '-', '.', starting with a letter", "agents", name)
		}
		if other, dup := topics[a.Topic]; dup {
			add(fmt.Sprintf("topic %q is already used by %s", a.Topic, other), "agents", name, "topic")
		}
		topics[a.Topic] = "agents." + name
		if a.GroupID == c.Kafka.GroupID {
			add(fmt.Sprintf("%q is the router's group (kafka.group_id): an agent needs a group of its own", a.GroupID), "agents", name, "group_id")
		}
		switch a.Encoding {
		case EncodingDefault, EncodingJSON:
		case EncodingAvro:
			if c.SchemaRegistry.URL == "" {
				add("avro needs schema_registry.url", "agents", name, "encoding")
			}
		default:
			add(fmt.Sprintf("%q is not an encoding: use avro or json", a.Encoding), "agents", name, "encoding")
		}
	}
	sort.Strings(agentNames)
	for name, it := range c.Intents {
		if !nameRE.MatchString(name) {
			add("intent type names use a-z, 0-9, '_', '-', '.', starting with a letter", "intents", name)
		}
		if it.Agent == "" {
			add("required: the agent that serves this intent type", "intents", name, "agent")
		} else if _, ok := c.Agents[it.Agent]; !ok {
			add(fmt.Sprintf("unknown agent %q (agents are: %s)", it.Agent, strings.Join(agentNames, ", ")), "intents", name, "agent")
		}
		if it.MaxTimeout > 0 && it.MinTimeout > it.MaxTimeout {
			add(fmt.Sprintf("%s is more than max_timeout %s", it.MinTimeout, it.MaxTimeout), "intents", name, "min_timeout")
		}
		if fc := it.Fallback.Cache; fc != nil {
			switch fc.Key {
			case CacheKeyContextRef, CacheKeySessionID, CacheKeyTenant, CacheKeyNone:
			default:
				add(fmt.Sprintf("%q is not a cache key: use context_ref, session_id, tenant or none", fc.Key), "intents", name, "fallback", "cache", "key")
			}
		}
		if it.Fallback.Static != nil {
			b, err := json.Marshal(it.Fallback.Static)
			if err != nil {
				add("cannot be written as JSON: "+err.Error(), "intents", name, "fallback", "static")
			}
			it.Fallback.StaticJSON = string(b)
		}
		c.validateTool(name, it, add)
	}
	c.compileSchemas(add)
	switch c.Router.Delivery {
	case AtLeastOnce, ExactlyOnce:
	default:
		add(fmt.Sprintf("%q is not a delivery guarantee: use exactly_once or at_least_once", c.Router.Delivery), "router", "delivery")
	}
	if c.Router.InstanceID != "" && !nameRE.MatchString(strings.ToLower(c.Router.InstanceID)) {
		add(fmt.Sprintf("%q: use letters, digits, '_', '-', '.', starting with a letter", c.Router.InstanceID), "router", "instance_id")
	}
	if c.Router.CommitInterval.D() < 1e6 {
		add("must be at least 1ms", "router", "commit_interval")
	}
	if c.Router.Tick.D() < 1e6 {
		add("must be at least 1ms", "router", "tick")
	}
	if c.Router.MaxPending < 1 {
		add("must be at least 1", "router", "max_pending")
	}
	if c.Router.LagInterval.D() < 1e9 {
		add("must be at least 1s", "router", "lag_interval")
	}
	c.validatePressure(add)
	c.validateBudget(add)
	c.validateMemory(add)
	c.validateContexts(add)
	c.validateLookup(add)
	c.validateAdmission(add)
	c.validateProgress(add)
	c.validateTelemetry(add)
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		add(fmt.Sprintf("%q is not a level: use debug, info, warn or error", c.Log.Level), "log", "level")
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		add(fmt.Sprintf("%q is not a format: use text or json", c.Log.Format), "log", "format")
	}
	return errs
}

// checkRange adds an error when v is outside [lo, hi]: Kafka's partition
// counts and message sizes are int32, replication factors int16, so a larger
// number fails only later, at the broker, without a file and line.
func checkRange(add func(string, ...string), v, lo, hi int, path ...string) {
	switch {
	case v < lo:
		add(fmt.Sprintf("must be at least %d", lo), path...)
	case v > hi:
		add(fmt.Sprintf("%d is more than Kafka allows (%d)", v, hi), path...)
	}
}

// lineOf finds the line of the key at path, or of its nearest ancestor that
// exists in the file (a missing key is reported where it should go).
func lineOf(root *yaml.Node, path ...string) int {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for _, k := range path {
		if i, err := strconv.Atoi(k); err == nil && n != nil && n.Kind == yaml.SequenceNode {
			if i < 0 || i >= len(n.Content) {
				break
			}
			n = n.Content[i]
			line = n.Line
			continue
		}
		if n == nil || n.Kind != yaml.MappingNode {
			break
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				line = n.Content[i].Line
				next = n.Content[i+1]
				break
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return line
}

var (
	yamlLineRE     = regexp.MustCompile(`line (\d+): (.*)`)
	unknownFieldRE = regexp.MustCompile(`field (\S+) not found in type`)
)

// yamlError turns yaml.v3's messages ("line 3: field bogus not found in type
// config.Kafka") into ours ("switchboard.yaml:3: kafka.bogus: unknown key").
func yamlError(file string, root *yaml.Node, err error) error {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	var errs Errors
	for _, m := range msgs {
		e := &Error{File: file, Msg: m}
		if sm := yamlLineRE.FindStringSubmatch(m); sm != nil {
			e.Line, _ = strconv.Atoi(sm[1])
			e.Msg = sm[2]
			e.Key = pathAtLine(root, e.Line)
		}
		if sm := unknownFieldRE.FindStringSubmatch(e.Msg); sm != nil {
			e.Msg = fmt.Sprintf("unknown key %q (check its spelling and indentation)", sm[1])
		}
		e.Msg = strings.ReplaceAll(e.Msg, "config.", "")
		errs = append(errs, e)
	}
	return errs
}

// pathAtLine returns the dotted path of the key written on line, if any.
func pathAtLine(root *yaml.Node, line int) string {
	var walk func(n *yaml.Node, path []string) []string
	walk = func(n *yaml.Node, path []string) []string {
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for _, c := range n.Content {
				if p := walk(c, path); p != nil {
					return p
				}
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := append(append([]string(nil), path...), k.Value)
				if k.Line == line {
					return p
				}
				if r := walk(v, p); r != nil {
					return r
				}
			}
		}
		return nil
	}
	return strings.Join(walk(root, nil), ".")
}
