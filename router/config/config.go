package config

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is the whole configuration file. The zero value is not useful: use
// Load or Parse, which apply defaults and validate.
type Config struct {
	Kafka          Kafka                  `yaml:"kafka"`
	SchemaRegistry SchemaRegistry         `yaml:"schema_registry"`
	Topics         Topics                 `yaml:"topics"`
	Agents         map[string]*Agent      `yaml:"agents"`
	Intents        map[string]*IntentType `yaml:"intents"`
	Router         Router                 `yaml:"router"`
	HTTP           HTTP                   `yaml:"http"`
	Log            Log                    `yaml:"log"`
	Contexts       Contexts               `yaml:"contexts"`
	Telemetry      Telemetry              `yaml:"telemetry"`

	file string     // where it was read from, for messages
	root *yaml.Node // the parsed file, for the lines of later errors (ErrorAt)
	// derived lists the byte budgets setMemoryDefaults derived from
	// router.memory_limit_bytes (their keys), for serve's log.
	derived []string
}

// Kafka is how Switchboard reaches the cluster.
type Kafka struct {
	// BootstrapServers is a comma-separated host:port list.
	// SWITCHBOARD_KAFKA_BOOTSTRAP_SERVERS overrides it.
	BootstrapServers string `yaml:"bootstrap_servers"`
	// GroupID is the router's consumer group. Default "switchboard-router".
	GroupID string `yaml:"group_id"`
	// Properties pass through to librdkafka as they are (security.protocol,
	// sasl.*, ssl.*, linger.ms, …), except those the router owns.
	Properties map[string]string `yaml:"properties"`
}

// SchemaRegistry is the Confluent Schema Registry Switchboard writes Avro
// through. Without a URL, Switchboard writes JSON. SWITCHBOARD_SCHEMA_REGISTRY_URL
// overrides the URL.
type SchemaRegistry struct {
	URL      string `yaml:"url"`
	Username string `yaml:"username"`
	Password string `yaml:"password"`
}

// Topics names the topics Switchboard reads and writes.
type Topics struct {
	Requests   string `yaml:"requests"`
	Responses  string `yaml:"responses"`
	Timeouts   string `yaml:"timeouts"`
	Results    string `yaml:"results"`
	DeadLetter string `yaml:"dead_letter"`
	// Pending is the compacted changelog of pending intents.
	Pending string `yaml:"pending"`
	// FallbackCache is the compacted topic of last good answers.
	FallbackCache string `yaml:"fallback_cache"`
	// ContextSnapshots is the compacted topic of per-entity context.
	ContextSnapshots string `yaml:"context_snapshots"`
	// Progress is where the router publishes agents' progress
	// (IntentProgress), intent-keyed. Default "mcp.intent.progress".
	Progress string `yaml:"progress"`

	// Partitions is the partition count of every topic Switchboard creates,
	// and the one count every intent-keyed topic must share (requests,
	// responses, results, timeouts, progress, pending, agents' topics), so that the
	// owner of a request also receives its response. Default 6.
	Partitions int `yaml:"partitions"`
	// ReplicationFactor of the topics Switchboard creates. Default 1.
	ReplicationFactor int `yaml:"replication_factor"`
	// Retention of the topics that are not compacted. Default 168h (7 days).
	Retention Duration `yaml:"retention"`
	// MaxMessageBytes is max.message.bytes of every topic. Default 1048576.
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// AutoCreate makes 'serve' create missing topics at start (as
	// 'switchboard topics create' does) and refuse to start on a conflict.
	AutoCreate bool `yaml:"auto_create"`
	// Overrides change the settings of one topic, by its name.
	Overrides map[string]*TopicOverride `yaml:"overrides"`
}

// TopicOverride changes one topic's settings. Zero fields keep the defaults.
type TopicOverride struct {
	Partitions        int      `yaml:"partitions"`
	ReplicationFactor int      `yaml:"replication_factor"`
	Retention         Duration `yaml:"retention"`
	MaxMessageBytes   int      `yaml:"max_message_bytes"`
}

// Encoding of the records Switchboard writes to an agent's topic.
const (
	EncodingDefault = ""     // Avro with a schema registry, JSON without
	EncodingAvro    = "avro" // Confluent wire format; needs schema_registry.url
	EncodingJSON    = "json" // JSON, whatever the default
)

// Agent is a destination for intents.
type Agent struct {
	// Topic the agent consumes its requests from. Default
	// "mcp.agent.<name>.request".
	Topic string `yaml:"topic"`
	// GroupID is the consumer group the agent's instances share: the router
	// reports its lag (AgentRequests not yet consumed). Default
	// "switchboard-agent-<name>", the group 'switchboard agent' and the Go
	// client (intents/client) join.
	GroupID string `yaml:"group_id"`
	// Encoding of the requests written to Topic: "avro", "json", or empty for
	// the default.
	Encoding string `yaml:"encoding"`
	// MaxInFlight bounds the intents dispatched to the agent and not yet
	// answered. Zero: no bound.
	MaxInFlight int `yaml:"max_in_flight"`
	// Rate bounds dispatches per second (a token bucket holding up to one
	// second's worth, at least one). Zero: no bound.
	Rate float64 `yaml:"rate"`
	// QueueLimit bounds the intents waiting for capacity; beyond it an
	// intent is shed at once. Zero: no bound but router.max_pending.
	QueueLimit int `yaml:"queue_limit"`
	// CircuitBreaker stops dispatching to an agent that keeps failing. Nil:
	// no breaker.
	CircuitBreaker *CircuitBreaker `yaml:"circuit_breaker"`
	// Overload says how the agent's intents degrade past its knee (see
	// Overload). Defaults: both rules on.
	Overload Overload `yaml:"overload"`
	// Demo says whether 'switchboard dev' runs a demo agent for this agent.
	// Nil: it does. False leaves the agent's topic to the user's own agent,
	// which the demo would otherwise answer for. serve ignores it.
	Demo *bool `yaml:"demo"`

	Name string `yaml:"-"`
}

// RunsDemo reports whether 'switchboard dev' runs a demo agent for a: unless
// demo: false.
func (a *Agent) RunsDemo() bool { return a.Demo == nil || *a.Demo }

// IntentType is the route, timeout and fallback of one intent type.
type IntentType struct {
	// Agent that serves this intent type (a key of agents).
	Agent string `yaml:"agent"`
	// Timeout when the intent does not ask for one. Default router.default_timeout.
	Timeout Duration `yaml:"timeout"`
	// MinTimeout and MaxTimeout clamp what an intent asks for with timeout_ms.
	MinTimeout Duration `yaml:"min_timeout"`
	MaxTimeout Duration `yaml:"max_timeout"`
	// IdleTimeout, when set, times an intent out (reason idle) when its agent
	// has sent nothing for this long since the dispatch or its last progress
	// message. It never extends Timeout.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// Retry dispatches again an intent whose agent answered with a
	// retryable error. Nil: no retries.
	Retry *Retry `yaml:"retry"`
	// Fallback says what a timed-out intent resolves with.
	Fallback Fallback `yaml:"fallback"`
	// Context "attach" attaches the snapshot of the intent's context_ref to
	// the AgentRequest, with its freshness; empty attaches nothing.
	Context string `yaml:"context"`
	// ContextMaxAge is how old an attached snapshot may be and count as
	// fresh. Default contexts.max_age.
	ContextMaxAge Duration `yaml:"context_max_age"`
	// Progress bounds the progress an agent may publish per intent
	// (progress.go).
	Progress Progress `yaml:"progress"`

	// Tool is how the intent type is described to callers: MCP clients see
	// it as a tool, and the API enforces its input_schema (tools.go).
	Tool `yaml:",inline"`

	Name string `yaml:"-"`
}

// Fallback is tried in order: the cache, then the static answer, else the
// intent resolves timed_out.
type Fallback struct {
	Cache  *CacheFallback `yaml:"cache"`
	Static any            `yaml:"static"`

	// StaticJSON is Static as JSON text, set by validation.
	StaticJSON string `yaml:"-"`
}

// CacheFallback answers a timed-out intent with the last good answer for the
// same intent type and cache key.
type CacheFallback struct {
	// MaxAge is how old a cached answer may be. Zero means no limit.
	MaxAge Duration `yaml:"max_age"`
	// Key is the request field the cache is keyed by: "context_ref" (the
	// default), "session_id", "tenant" or "none" (one answer per intent type).
	Key string `yaml:"key"`
}

// Cache keys.
const (
	CacheKeyContextRef = "context_ref"
	CacheKeySessionID  = "session_id"
	CacheKeyTenant     = "tenant"
	CacheKeyNone       = "none"
)

// Delivery guarantees.
const (
	AtLeastOnce = "at_least_once"
	ExactlyOnce = "exactly_once"
)

// Router tunes the routing engine.
type Router struct {
	// Delivery is exactly_once (the default: a commit interval's records,
	// their outputs and their offsets in one Kafka transaction) or
	// at_least_once (offsets committed once everything a record caused has
	// been acknowledged; an instance's death can duplicate outputs).
	Delivery string `yaml:"delivery"`
	// InstanceID names this instance, stably across restarts: it is the
	// consumer's group.instance.id (static membership: a restarted instance
	// gets its partitions back without a rebalance) and the suffix of the
	// transactional.id (a restarted instance aborts what its previous life
	// left open). Each instance needs its own. Empty: a random id, without
	// static membership. SWITCHBOARD_INSTANCE_ID overrides it.
	InstanceID string `yaml:"instance_id"`
	// CommitInterval bounds how long exactly_once leaves consumed records
	// uncommitted when they caused no output; a transaction that holds
	// outputs commits as soon as the previous commit has finished (group
	// commit). Under at_least_once an intent's pending state waits one
	// interval (to the tick after it) before it is written, and an intent
	// resolved meanwhile writes none. Default 100ms.
	CommitInterval Duration `yaml:"commit_interval"`
	// DefaultTimeout applies to intent types that set no timeout. Default 30s.
	DefaultTimeout Duration `yaml:"default_timeout"`
	// Tick is the timing wheel's resolution. Default 5ms.
	Tick Duration `yaml:"tick"`
	// MaxPending bounds the intents in flight; at the bound the router pauses
	// fetching requests. Default 1,000,000.
	MaxPending int `yaml:"max_pending"`
	// MaxPendingBytes bounds the bytes pending intents hold (payloads and
	// their other fields) together with the records fetched and on their
	// way to them (the poll queue); at the bound the router pauses fetching
	// requests, as at MaxPending, so that what was fetched before the pause
	// is inside the bound. Default 256 MiB.
	MaxPendingBytes int64 `yaml:"max_pending_bytes"`
	// MaxPendingBytesPerTenant bounds one tenant's: a tenant's new intent
	// that would pass it resolves shed at once (error code tenant_budget),
	// so that one tenant cannot pause the others. Intents without a tenant
	// answer to MaxPendingBytes only. Default 64 MiB, at most
	// MaxPendingBytes.
	MaxPendingBytesPerTenant int64 `yaml:"max_pending_bytes_per_tenant"`
	// MemoryLimitBytes is the whole process's memory budget: 'serve' gives
	// Go's runtime (debug.SetMemoryLimit) this less what librdkafka and
	// pebble hold outside Go, when the GOMEMLIMIT environment variable is
	// unset, and the router pauses its intake at 90% of Go's share and, while
	// intents are pending, when the process's resident set reaches 90% of
	// this. Default 0: Go's limit is derived from the byte budgets
	// (max_pending_bytes, http.results_max_bytes, four WebSocket send queues)
	// plus a 64 MiB baseline, and the resident set is not watched ('serve'
	// logs the budget that implies, 896 MiB with the defaults); see
	// cmd/switchboard/memlimit.go.
	MemoryLimitBytes int64 `yaml:"memory_limit_bytes"`
	// DedupWindow is how long a resolved intent id is remembered, to ignore
	// duplicate requests and to tell late responses from unknown ones.
	// Default 10m.
	DedupWindow Duration `yaml:"dedup_window"`
	// FallbackCacheSize bounds the fallback cache's entries. Default 100,000.
	FallbackCacheSize int `yaml:"fallback_cache_size"`
	// LagInterval is how often each instance samples its agents' consumer
	// lag, and how often its consumer reports its own (librdkafka's
	// statistics.interval.ms). Default 15s, at least 1s.
	LagInterval Duration `yaml:"lag_interval"`
	// AbortHangingTransactions says whether each instance ends a hanging
	// transaction on Switchboard's topics itself (the marker its
	// coordinator decided, commit or abort, read from the transaction log,
	// for a producer whose transaction holds a partition's last stable
	// offset, silent for the transaction timeout, and with no transaction
	// in progress on that partition at its coordinator); false: it only
	// reports it, with the command to abort it. Default true. Under ACLs it
	// needs ClusterAction on the cluster and Read on __transaction_state.
	AbortHangingTransactions *bool `yaml:"abort_hanging_transactions"`
}

// AbortsHangingTransactions reports whether AbortHangingTransactions is on
// (unset: on).
func (r *Router) AbortsHangingTransactions() bool {
	return r.AbortHangingTransactions == nil || *r.AbortHangingTransactions
}

// HTTP is the API's listener.
type HTTP struct {
	Listen string `yaml:"listen"`
	// MaxWait caps ?wait on POST /v1/intents. Default 60s.
	MaxWait Duration `yaml:"max_wait"`
	// Results is how many recent results each instance keeps for lookups.
	// Default 100,000.
	Results int `yaml:"results"`
	// ResultsMaxBytes bounds those results in bytes, fairly between tenants
	// (see the README's Security section). 0: the API's default (128 MiB).
	ResultsMaxBytes int64 `yaml:"results_max_bytes"`
	// MaxBodyBytes, MaxHeaderBytes, ReadHeaderTimeout, BodyReadTimeout and
	// IdleTimeout bound requests (http_limits.go). 0: the API's defaults.
	MaxBodyBytes      int64    `yaml:"max_body_bytes"`
	MaxHeaderBytes    int      `yaml:"max_header_bytes"`
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"`
	BodyReadTimeout   Duration `yaml:"body_read_timeout"`
	IdleTimeout       Duration `yaml:"idle_timeout"`
	// MaxWaiting bounds the callers waiting for a result on one instance
	// (POST /v1/intents?wait and ?stream=sse, GET /v1/intents/{id}?wait,
	// MCP tools/call and tasks/result); one more is refused at once,
	// nothing published (503 overloaded, reason "waiting").
	// MaxWaitingPerTenant bounds one authenticated tenant's
	// (http_limits.go). Defaults 4096 and half of MaxWaiting.
	MaxWaiting          int `yaml:"max_waiting"`
	MaxWaitingPerTenant int `yaml:"max_waiting_per_tenant"`
	// MaxWaitingBytes bounds the bytes those callers' requests hold while
	// they wait (payloads; an MCP call's arguments twice), the same way;
	// MaxWaitingBytesPerTenant one tenant's. Defaults 256 MiB and half.
	MaxWaitingBytes          int64 `yaml:"max_waiting_bytes"`
	MaxWaitingBytesPerTenant int64 `yaml:"max_waiting_bytes_per_tenant"`
	// MaxReadingBytes bounds the bytes the request bodies being read on
	// one instance reserve before they are read (each its Content-Length,
	// or max_body_bytes when chunked); one more is refused at once, its
	// body unread (503 overloaded, reason "reading").
	// MaxReadingBytesPerTenant bounds one authenticated tenant's
	// (http_limits.go). Defaults 64 MiB and half; with
	// router.memory_limit_bytes, both it and MaxWaitingBytes are derived
	// from the budget when unset (memory.go).
	MaxReadingBytes          int64 `yaml:"max_reading_bytes"`
	MaxReadingBytesPerTenant int64 `yaml:"max_reading_bytes_per_tenant"`
	// MaxConnections bounds the connections the API's listener holds open
	// (every route's: health and metrics share it, unless AdminListen
	// serves them too); one more is closed at once and counted (reason
	// "connections"). Default 16,384.
	MaxConnections int `yaml:"max_connections"`
	// AdminListen, when set (e.g. "0.0.0.0:9090"), also serves GET
	// /healthz, /readyz and /metrics on a listener of their own, outside
	// MaxConnections, so that probes and scrapes still get through while
	// callers fill the API's listener. Absent: none.
	AdminListen string `yaml:"admin_listen"`
	// AllowedOrigins are the browser origins allowed besides the API's own
	// ("*": any); see http_auth.go.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// Auth is who may call the API, as which tenant.
	Auth HTTPAuth `yaml:"auth"`
	// WebSocket is the limits of stream connections.
	WebSocket WebSocket `yaml:"websocket"`
	// Lookup is the store that answers for every intent (lookup.go).
	Lookup HTTPLookup `yaml:"lookup"`
	// MCP is the Model Context Protocol endpoint (mcp.go).
	MCP MCP `yaml:"mcp"`
	// Admission refuses intents the backlog would let expire (admission.go).
	Admission HTTPAdmission `yaml:"admission"`
}

// Log sets the log level (debug, info, warn, error) and format (text, json).
type Log struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// Duration is a time.Duration written as "300ms", "2s", "10m".
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes d like "2s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads "300ms", "2s", "10m", "1h30m".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration: write it like 300ms, 2s or 10m", string(b))
	}
	if v < 0 {
		return fmt.Errorf("%q is negative", string(b))
	}
	*d = Duration(v)
	return nil
}

// File is where the configuration was read from ("" when built in code).
func (c *Config) File() string { return c.file }

// AgentFor returns the agent that serves an intent type.
func (c *Config) AgentFor(it *IntentType) *Agent { return c.Agents[it.Agent] }
