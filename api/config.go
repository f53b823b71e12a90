package api

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults for the zero values of [Config].
const (
	DefaultListen            = "127.0.0.1:8080"
	DefaultMaxWait           = 60 * time.Second
	DefaultMaxBodyBytes      = 1 << 20
	DefaultSendQueue         = 256
	DefaultPingPeriod        = 25 * time.Second
	DefaultPongWait          = 60 * time.Second
	DefaultWriteWait         = 10 * time.Second
	DefaultMaxMessageBytes   = 64 << 10
	DefaultMaxSubscriptions  = 1000
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultBodyReadTimeout   = 30 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultSendQueueBytes    = 8 << 20
	DefaultShutdownTimeout   = 10 * time.Second
)

// Config is the declarative configuration of a [Server]. The zero value of
// every field means its default (the Default* constants); negative values are
// invalid.
type Config struct {
	// Listen is the TCP address Run listens on, e.g. "127.0.0.1:8080";
	// ":0" picks a free port (see [Server.Addr]).
	Listen string

	// MaxWait caps the ?wait of POST /v1/intents.
	MaxWait time.Duration

	// MaxBodyBytes caps a request's body (POST /v1/intents, DELETE's
	// reason); a larger body gets 413, at once if its Content-Length says so
	// (body.go).
	MaxBodyBytes int64

	// MaxReadingBytes bounds the bytes the request bodies being read on
	// this instance reserve (each its Content-Length, or MaxBodyBytes when
	// chunked), MaxReadingBytesPerTenant one authenticated tenant's, at
	// most MaxReadingBytes; one more is refused before its body is read,
	// 503 overloaded, reason "reading" (reading.go). Defaults
	// DefaultMaxReadingBytes and half of MaxReadingBytes.
	MaxReadingBytes, MaxReadingBytesPerTenant int64

	// MaxHTTPConnections bounds the connections Run's listener holds open
	// at once, every route's (health, metrics and streams included); one
	// more is accepted and closed at once, and counted (listener.go).
	MaxHTTPConnections int

	// AdminListen, when set, is a second TCP address Run listens on that
	// serves only GET /healthz, /readyz and /metrics (admin.go), outside
	// MaxHTTPConnections: probes and scrapes still get through while
	// callers fill the API's listener. Empty: none.
	AdminListen string

	// BodyReadTimeout is how long a request's body may take to arrive whole,
	// from the end of its headers (on the injected clock); a slower one gets
	// 408 body_timeout and the connection is closed (body.go).
	BodyReadTimeout time.Duration

	// SendQueue is the number of messages queued for one WebSocket client.
	// A client whose queue is full is disconnected with close code 1013 (try
	// again later): a slow client never holds up Results.Add or other clients.
	SendQueue int

	// SendQueueBytes caps the bytes queued for one WebSocket client besides
	// the count: a message that would take the queue past it closes the
	// client with 1013 like a full queue (a message is always accepted into
	// an empty queue, however large). It bounds an event stream's progress
	// records waiting for its client the same way (then slow_consumer).
	SendQueueBytes int

	// PingPeriod is how often the server pings WebSocket clients and checks
	// their liveness. It must be shorter than PongWait.
	PingPeriod time.Duration

	// PongWait is how long a WebSocket client may stay silent (no pong, no
	// message) before it is disconnected. A silent client is noticed at the
	// first keepalive check after PongWait, so within PongWait+PingPeriod.
	PongWait time.Duration

	// WriteWait is the longest one write to a WebSocket client may take, and
	// how long a closing connection waits for the client's close frame. It is
	// enforced by the keepalive check, so within WriteWait+PingPeriod.
	// It also bounds, exactly, each write and flush of the answers of POST
	// /v1/intents (?wait, ?stream=sse), GET /v1/intents/{id} and its events,
	// and of a handler mounted with WithMCP: past it the connection is
	// closed (writewait.go).
	WriteWait time.Duration

	// MaxMessageBytes caps one message from a WebSocket client; a larger one
	// closes the connection with code 1009 (message too big).
	MaxMessageBytes int64

	// MaxSubscriptions caps the subscriptions (intent ids, session ids and
	// intent types together) one WebSocket connection holds at a time. An
	// intent-id subscription ends when its result has been sent.
	MaxSubscriptions int

	// AllowedOrigins lists the browser origins ("https://console.example.com")
	// allowed to call the API and open a WebSocket besides the server's own
	// origin, which is always allowed; "*" allows any. A request from
	// another origin is refused with 403 forbidden_origin; an allowed
	// cross-origin request gets CORS headers. Requests without an Origin
	// header (non-browser clients) are always allowed.
	AllowedOrigins []string

	// Auth says who may call the API, and as which tenant (auth.go). The
	// zero value lets everyone in: for local development only.
	Auth AuthConfig

	// MessageRate (per second) and MessageBurst limit the messages of one
	// WebSocket client; MaxConnectionsPerTenant caps a tenant's stream
	// connections (WebSocket and event streams), MaxConnections the
	// instance's (limits.go).
	MessageRate             float64
	MessageBurst            int
	MaxConnectionsPerTenant int
	MaxConnections          int

	// MaxReplays caps the resumes replaying history at once on this server,
	// MaxReplaysPerTenant those of one tenant; one more is answered
	// "resume_unavailable" (limits.go).
	MaxReplays          int
	MaxReplaysPerTenant int

	// ReadHeaderTimeout, IdleTimeout and MaxHeaderBytes are passed to
	// http.Server by Run: how long a request's headers may take to arrive,
	// how long a keep-alive connection may wait for its next request, and
	// how large the headers may be (a larger request gets 431).
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int

	// ShutdownTimeout bounds the graceful shutdown Run performs when its
	// context ends (measured on the injected clock).
	ShutdownTimeout time.Duration
}

// setDefaults replaces zero values with their defaults. It is the one place
// defaults are applied.
func (c *Config) setDefaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.MaxWait == 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.SendQueue == 0 {
		c.SendQueue = DefaultSendQueue
	}
	if c.SendQueueBytes == 0 {
		c.SendQueueBytes = DefaultSendQueueBytes
	}
	if c.MaxReadingBytes == 0 {
		c.MaxReadingBytes = DefaultMaxReadingBytes
	}
	if c.MaxReadingBytesPerTenant == 0 {
		c.MaxReadingBytesPerTenant = max(1, c.MaxReadingBytes/2)
	}
	if c.MaxHTTPConnections == 0 {
		c.MaxHTTPConnections = DefaultMaxHTTPConnections
	}
	if c.BodyReadTimeout == 0 {
		c.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if c.PingPeriod == 0 {
		c.PingPeriod = DefaultPingPeriod
	}
	if c.PongWait == 0 {
		c.PongWait = DefaultPongWait
	}
	if c.WriteWait == 0 {
		c.WriteWait = DefaultWriteWait
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MaxSubscriptions == 0 {
		c.MaxSubscriptions = DefaultMaxSubscriptions
	}
	if c.ReadHeaderTimeout == 0 {
		c.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	c.setLimitDefaults()
	c.Auth.setDefaults()
}

// Validate reports the first invalid field, as an error wrapping
// [ErrInvalidConfig]. Zero values are valid: they take their defaults.
func (c Config) Validate() error {
	c.setDefaults()
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("%w: Listen %q: %v", ErrInvalidConfig, c.Listen, err)
	}
	if c.AdminListen != "" {
		if _, _, err := net.SplitHostPort(c.AdminListen); err != nil {
			return fmt.Errorf("%w: AdminListen %q: %v", ErrInvalidConfig, c.AdminListen, err)
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"MaxWait", c.MaxWait},
		{"PingPeriod", c.PingPeriod},
		{"PongWait", c.PongWait},
		{"WriteWait", c.WriteWait},
		{"ReadHeaderTimeout", c.ReadHeaderTimeout},
		{"BodyReadTimeout", c.BodyReadTimeout},
		{"IdleTimeout", c.IdleTimeout},
		{"ShutdownTimeout", c.ShutdownTimeout},
	} {
		if f.v < 0 {
			return fmt.Errorf("%w: %s is negative (%v)", ErrInvalidConfig, f.name, f.v)
		}
	}
	if c.PingPeriod >= c.PongWait {
		return fmt.Errorf("%w: PingPeriod (%v) must be shorter than PongWait (%v)", ErrInvalidConfig, c.PingPeriod, c.PongWait)
	}
	if c.MaxBodyBytes < 0 {
		return fmt.Errorf("%w: MaxBodyBytes is negative (%d)", ErrInvalidConfig, c.MaxBodyBytes)
	}
	if c.MaxReadingBytes < 0 || c.MaxReadingBytesPerTenant < 0 || c.MaxReadingBytesPerTenant > c.MaxReadingBytes {
		return fmt.Errorf("%w: the reading byte bounds must be positive, a tenant's at most the instance's (%d, %d per tenant)", ErrInvalidConfig, c.MaxReadingBytes, c.MaxReadingBytesPerTenant)
	}
	if c.MaxHTTPConnections < 0 {
		return fmt.Errorf("%w: MaxHTTPConnections is negative (%d)", ErrInvalidConfig, c.MaxHTTPConnections)
	}
	if c.MaxMessageBytes < 0 {
		return fmt.Errorf("%w: MaxMessageBytes is negative (%d)", ErrInvalidConfig, c.MaxMessageBytes)
	}
	if c.SendQueue < 0 {
		return fmt.Errorf("%w: SendQueue is negative (%d)", ErrInvalidConfig, c.SendQueue)
	}
	if c.SendQueueBytes < 0 {
		return fmt.Errorf("%w: SendQueueBytes is negative (%d)", ErrInvalidConfig, c.SendQueueBytes)
	}
	if c.MaxHeaderBytes < 0 {
		return fmt.Errorf("%w: MaxHeaderBytes is negative (%d)", ErrInvalidConfig, c.MaxHeaderBytes)
	}
	if c.MaxSubscriptions < 0 {
		return fmt.Errorf("%w: MaxSubscriptions is negative (%d)", ErrInvalidConfig, c.MaxSubscriptions)
	}
	for _, o := range c.AllowedOrigins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("%w: AllowedOrigins: %q is not an origin like https://host[:port] or *", ErrInvalidConfig, o)
		}
	}
	if err := c.validateLimits(); err != nil {
		return err
	}
	return c.Auth.validate()
}

// Option sets an optional dependency of a [Server].
type Option func(*options)

type options struct {
	clock      clockwork.Clock
	logger     *slog.Logger
	registerer prometheus.Registerer
	gatherer   prometheus.Gatherer
	readiness  func() error
	degraded   func() []string
	contexts   ContextStore
	history    History
	catalog    Catalog
	agentState func(agent string) any
	lookup     IntentLookup // nil: this instance's memory only (intentlookup.go)
	agentLag   func(agent string) any
	mcp        http.Handler
	tracing    apiTracing // tracing.go
	reload     func(context.Context) ReloadReport
	admission  *Admission // nil: admit everything
	waitLimit  *WaitLimit // nil: no bound on waiting callers

	idempotencyWindow time.Duration
}

// WithClock sets the clock used for ?wait deadlines, WebSocket keepalives,
// created_at and request durations. Default: the real clock.
func WithClock(c clockwork.Clock) Option { return func(o *options) { o.clock = c } }

// WithLogger sets the logger. Default: slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithRegisterer sets where the server registers its own metrics. Default:
// prometheus.DefaultRegisterer. [New] returns an error (it does not panic) if
// they are already registered there.
func WithRegisterer(r prometheus.Registerer) Option {
	return func(o *options) { o.registerer = r }
}

// WithGatherer sets what GET /metrics serves. Default:
// prometheus.DefaultGatherer.
func WithGatherer(g prometheus.Gatherer) Option { return func(o *options) { o.gatherer = g } }

// WithReadiness sets the check behind GET /readyz: nil from f means ready.
// It is called on every request and must be quick and safe for concurrent
// use. Default: always ready (until Shutdown begins).
func WithReadiness(f func() error) Option { return func(o *options) { o.readiness = f } }

// WithDegradation sets what GET /readyz lists, while ready, under
// "degraded": problems an operator must see that do not make the instance
// unready (every instance would see them at once, and taking all of them
// out of service would not help), e.g. a hanging transaction. f is called
// on every request and must be quick and safe for concurrent use. Default:
// none.
func WithDegradation(f func() []string) Option { return func(o *options) { o.degraded = f } }

// WithAdmission refuses intents on POST /v1/intents before publishing them
// when a's backlog says they would most likely expire unread (503 with
// Retry-After). Default: nil, every intent is published.
func WithAdmission(a *Admission) Option { return func(o *options) { o.admission = a } }

// WithWaitLimit bounds the callers of POST /v1/intents that wait for the
// result (?wait, ?stream=sse): one more is refused before anything is
// published (503 overloaded, reason "waiting", Retry-After: 1). Share l
// with the MCP endpoint's. Default: nil, no bound.
func WithWaitLimit(l *WaitLimit) Option { return func(o *options) { o.waitLimit = l } }

func buildOptions(opts []Option) (options, error) {
	o := options{
		clock:      clockwork.NewRealClock(),
		logger:     slog.Default(),
		registerer: prometheus.DefaultRegisterer,
		gatherer:   prometheus.DefaultGatherer,
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	switch {
	case o.clock == nil:
		return o, fmt.Errorf("%w: WithClock(nil)", ErrInvalidConfig)
	case o.logger == nil:
		return o, fmt.Errorf("%w: WithLogger(nil)", ErrInvalidConfig)
	case o.registerer == nil:
		return o, fmt.Errorf("%w: WithRegisterer(nil)", ErrInvalidConfig)
	case o.gatherer == nil:
		return o, fmt.Errorf("%w: WithGatherer(nil)", ErrInvalidConfig)
	}
	if o.degraded == nil {
		o.degraded = func() []string { return nil }
	}
	if o.readiness == nil {
		o.readiness = func() error { return nil }
	}
	return o, nil
}
