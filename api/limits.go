package api

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/gorilla/websocket"
)

// ReasonStreamConnections is the reason of a stream refused because the
// instance already holds Config.MaxConnections stream connections.
const ReasonStreamConnections = "stream_connections"

// Defaults of the stream limits in [Config].
const (
	DefaultMessageRate             = 50.0
	DefaultMessageBurst            = 100
	DefaultMaxConnectionsPerTenant = 1000
	DefaultMaxConnections          = 8192
	DefaultMaxReplays              = 16
	DefaultMaxReplaysPerTenant     = 4
)

// The stream's limits, with those of config.go (SendQueue, PingPeriod,
// PongWait, WriteWait, MaxMessageBytes, MaxSubscriptions):
//
//   - client messages: a token bucket per connection on the injected clock,
//     Config.MessageRate per second with bursts of Config.MessageBurst. A
//     message over the rate is dropped and answered with an error
//     "rate_limited"; once MessageBurst messages have been dropped without
//     the bucket filling up again in between, the connection is closed with
//     1008 (policy violation). A client that slows down is forgiven when its
//     bucket is full again.
//   - connections: a tenant holds at most Config.MaxConnectionsPerTenant
//     stream connections; one more upgrade is answered 429
//     too_many_connections (without authentication there are no tenants,
//     and no tenant cap). The instance holds at most Config.MaxConnections
//     of all tenants' and unauthenticated callers'; one more is answered
//     503 overloaded, reason stream_connections.
//   - replays: at most Config.MaxReplays resumes read history at once, at
//     most Config.MaxReplaysPerTenant of one tenant; one more is answered
//     "resume_unavailable" (retry later). While one replays, the live
//     messages held back for it are capped at 16 x SendQueue messages and
//     SendQueue x 64 KiB; past either the client is closed with 1013.

func (c *Config) setLimitDefaults() {
	if c.MessageRate == 0 {
		c.MessageRate = DefaultMessageRate
	}
	if c.MessageBurst == 0 {
		c.MessageBurst = DefaultMessageBurst
	}
	if c.MaxConnectionsPerTenant == 0 {
		c.MaxConnectionsPerTenant = DefaultMaxConnectionsPerTenant
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.MaxReplays == 0 {
		c.MaxReplays = DefaultMaxReplays
	}
	if c.MaxReplaysPerTenant == 0 {
		c.MaxReplaysPerTenant = DefaultMaxReplaysPerTenant
	}
}

func (c Config) validateLimits() error {
	switch {
	case c.MessageRate < 0:
		return fmt.Errorf("%w: MessageRate is negative (%v)", ErrInvalidConfig, c.MessageRate)
	case c.MessageBurst < 0:
		return fmt.Errorf("%w: MessageBurst is negative (%d)", ErrInvalidConfig, c.MessageBurst)
	case c.MaxConnections < 0:
		return fmt.Errorf("%w: MaxConnections is negative (%d)", ErrInvalidConfig, c.MaxConnections)
	case c.MaxConnectionsPerTenant < 0:
		return fmt.Errorf("%w: MaxConnectionsPerTenant is negative (%d)", ErrInvalidConfig, c.MaxConnectionsPerTenant)
	case c.MaxReplays < 0:
		return fmt.Errorf("%w: MaxReplays is negative (%d)", ErrInvalidConfig, c.MaxReplays)
	case c.MaxReplaysPerTenant < 0:
		return fmt.Errorf("%w: MaxReplaysPerTenant is negative (%d)", ErrInvalidConfig, c.MaxReplaysPerTenant)
	}
	return nil
}

// tokenBucket limits one connection's messages. Only the connection's reader
// uses it, so it needs no lock.
type tokenBucket struct {
	rate    float64 // tokens per second
	burst   float64
	tokens  float64
	last    time.Time
	dropped int // messages refused since the bucket was last full
}

func newTokenBucket(rate float64, burst int, now time.Time) *tokenBucket {
	return &tokenBucket{rate: rate, burst: float64(burst), tokens: float64(burst), last: now}
}

// allow takes a token for a message arriving at now, or reports false (and
// counts the refusal) when there is none.
func (b *tokenBucket) allow(now time.Time) bool {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
		b.last = now
	}
	if b.tokens >= b.burst {
		b.dropped = 0
	}
	if b.tokens >= 1 {
		b.tokens--
		return true
	}
	b.dropped++
	return false
}

// persistent reports whether the client keeps sending over the rate: burst
// refusals without the bucket filling up in between.
func (b *tokenBucket) persistent() bool { return float64(b.dropped) >= b.burst }

// receive is the reader's entry for one client message: it applies the rate
// limit, then handles the message. After a policy close has been asked for,
// messages are ignored while the reader waits for the client's close answer.
func (c *wsConn) receive(typ int, data []byte) {
	now := c.srv.clock.Now()
	c.lastSeen.Store(now.UnixNano())
	if c.policyClosing {
		return
	}
	if c.limiter == nil {
		c.limiter = newTokenBucket(c.srv.cfg.MessageRate, c.srv.cfg.MessageBurst, now)
	}
	if c.limiter.allow(now) {
		c.handle(typ, data)
		return
	}
	c.srv.metrics.wsRateLimited.Inc()
	if c.limiter.persistent() {
		c.policyClosing = true
		c.srv.metrics.wsPolicyCloses.Inc()
		c.srv.log.LogAttrs(c.srv.stopCtx, slog.LevelDebug, "stream closed for its message rate")
		c.policyOnce.Do(func() { close(c.policy) })
		return
	}
	c.sendError(codeRateLimited, fmt.Sprintf(
		"more than %g messages per second (bursts of %d): this message was dropped; keep sending this fast and the connection is closed with %d",
		c.srv.cfg.MessageRate, c.srv.cfg.MessageBurst, websocket.ClosePolicyViolation))
}
