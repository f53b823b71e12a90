package config

import (
	"fmt"
	"net"
)

// DefaultMaxWaiting is http.max_waiting's default, the API's
// (api.DefaultMaxWaiting): about a second of what a 2-core host answers
// through the API at its knee (3,000-4,000 intents/s, BENCHMARKS.md), and a
// fifth of serve's 20,000 descriptors. http.max_waiting_per_tenant's
// default is half of http.max_waiting.
const DefaultMaxWaiting = 4096

// DefaultMaxMCPSessions is http.mcp.max_sessions's default, the MCP
// endpoint's (api.DefaultMaxMCPSessions); max_sessions_per_tenant's is half
// of it.
const DefaultMaxMCPSessions = 4096

// DefaultMaxWaitingBytes is http.max_waiting_bytes's default, the API's
// (api.DefaultMaxWaitingBytes); max_waiting_bytes_per_tenant's is half of
// it.
const DefaultMaxWaitingBytes = 256 << 20

// DefaultMaxReadingBytes is http.max_reading_bytes's default, the API's
// (api.DefaultMaxReadingBytes); max_reading_bytes_per_tenant's is half of
// it.
const DefaultMaxReadingBytes = 64 << 20

// MinMaxWaitingBytes is the least http.max_waiting_bytes and
// max_waiting_bytes_per_tenant accept: below it a bound would refuse
// ordinary requests for their size alone. It is also the least of
// http.max_reading_bytes and max_reading_bytes_per_tenant.
const MinMaxWaitingBytes = 64 << 10

// setWaitingDefaults sets http.max_waiting, max_waiting_per_tenant,
// max_waiting_bytes, max_waiting_bytes_per_tenant, max_reading_bytes,
// max_reading_bytes_per_tenant, http.mcp.max_sessions and
// max_sessions_per_tenant when absent (0).
func (c *Config) setWaitingDefaults() {
	h := &c.HTTP
	for _, b := range []struct {
		max, perTenant *int64
		def            int64
	}{
		{&h.MaxWaitingBytes, &h.MaxWaitingBytesPerTenant, DefaultMaxWaitingBytes},
		{&h.MaxReadingBytes, &h.MaxReadingBytesPerTenant, DefaultMaxReadingBytes},
	} {
		if *b.max == 0 {
			*b.max = b.def
		}
		if *b.perTenant == 0 && *b.max > 0 {
			*b.perTenant = max(MinMaxWaitingBytes, *b.max/2)
		}
	}
	for _, b := range c.holdBounds() {
		if *b.max == 0 {
			*b.max = b.def
		}
		if *b.perTenant == 0 && *b.max > 0 {
			*b.perTenant = max(1, *b.max/2)
		}
	}
}

// holdBound is a count bound on what callers hold on one instance, with
// its per-tenant share, their keys and the instance bound's default.
type holdBound struct {
	path              []string // the keys' parent: http, or http.mcp
	key, perTenantKey string
	max, perTenant    *int
	def               int
}

func (c *Config) holdBounds() []holdBound {
	h := &c.HTTP
	return []holdBound{
		{[]string{"http"}, "max_waiting", "max_waiting_per_tenant", &h.MaxWaiting, &h.MaxWaitingPerTenant, DefaultMaxWaiting},
		{[]string{"http", "mcp"}, "max_sessions", "max_sessions_per_tenant", &h.MCP.MaxSessions, &h.MCP.MaxSessionsPerTenant, DefaultMaxMCPSessions},
	}
}

// validateWaiting checks the bounds of holdBounds and the waiting and
// reading byte bounds: positive, and a tenant's no larger than the
// instance's; http.max_connections: not negative; http.admin_listen:
// host:port, not http.listen's.
func (c *Config) validateWaiting() Errors {
	var errs Errors
	h := c.HTTP
	for _, b := range []struct {
		key, perTenantKey string
		max, perTenant    int64
	}{
		{"max_waiting_bytes", "max_waiting_bytes_per_tenant", h.MaxWaitingBytes, h.MaxWaitingBytesPerTenant},
		{"max_reading_bytes", "max_reading_bytes_per_tenant", h.MaxReadingBytes, h.MaxReadingBytesPerTenant},
	} {
		for _, f := range []struct {
			key string
			v   int64
		}{{b.key, b.max}, {b.perTenantKey, b.perTenant}} {
			switch {
			case f.v < 0:
				errs = append(errs, c.ErrorAt("must not be negative (0 or absent: the default)", "http", f.key))
			case f.v > 0 && f.v < MinMaxWaitingBytes:
				errs = append(errs, c.ErrorAt(fmt.Sprintf("%d bytes is too small: at least %d (0 or absent: the default)", f.v, MinMaxWaitingBytes), "http", f.key))
			}
		}
		if b.max > 0 && b.perTenant > b.max {
			errs = append(errs, c.ErrorAt(fmt.Sprintf("%d is more than %s %d: a tenant's bound is a share of the instance's", b.perTenant, b.key, b.max), "http", b.perTenantKey))
		}
	}
	if h.MaxConnections < 0 {
		errs = append(errs, c.ErrorAt("must not be negative (0 or absent: the default, 16384)", "http", "max_connections"))
	}
	if h.AdminListen != "" {
		if _, _, err := net.SplitHostPort(h.AdminListen); err != nil {
			errs = append(errs, c.ErrorAt(fmt.Sprintf("%q is not host:port (%v)", h.AdminListen, err), "http", "admin_listen"))
		} else if h.AdminListen == h.Listen {
			errs = append(errs, c.ErrorAt(fmt.Sprintf("%q is http.listen's address: give the admin listener one of its own", h.AdminListen), "http", "admin_listen"))
		}
	}
	for _, b := range c.holdBounds() {
		at := func(key string) []string { return append(append([]string{}, b.path...), key) }
		if *b.max < 0 {
			errs = append(errs, c.ErrorAt(fmt.Sprintf("must not be negative (0 or absent: the default, %d)", b.def), at(b.key)...))
		}
		switch {
		case *b.perTenant < 0:
			errs = append(errs, c.ErrorAt(fmt.Sprintf("must not be negative (0 or absent: half of %s)", b.key), at(b.perTenantKey)...))
		case *b.max > 0 && *b.perTenant > *b.max:
			errs = append(errs, c.ErrorAt(fmt.Sprintf("%d is more than %s %d: a tenant's bound is a share of the instance's", *b.perTenant, b.key, *b.max), at(b.perTenantKey)...))
		}
	}
	return errs
}

// Lower bounds of http's byte limits: below them the API could not serve
// an ordinary request or keep an ordinary result.
const (
	MinResultsMaxBytes = 64 << 10
	MinMaxBodyBytes    = 1024
	MinMaxHeaderBytes  = 4096
)

// validateHTTPLimits checks http's byte bounds as written: each is 0 or
// absent (the API's default) or a sane positive value. (Its durations,
// read_header_timeout, body_read_timeout and idle_timeout, cannot be
// negative: Duration refuses that when it is read.)
func (c *Config) validateHTTPLimits() Errors {
	var errs Errors
	h := c.HTTP
	for _, f := range []struct {
		key      string
		v, least int64
	}{
		{"results_max_bytes", h.ResultsMaxBytes, MinResultsMaxBytes},
		{"max_body_bytes", h.MaxBodyBytes, MinMaxBodyBytes},
		{"max_header_bytes", int64(h.MaxHeaderBytes), MinMaxHeaderBytes},
	} {
		switch {
		case f.v < 0:
			errs = append(errs, c.ErrorAt("must not be negative (0 or absent: the default)", "http", f.key))
		case f.v > 0 && f.v < f.least:
			errs = append(errs, c.ErrorAt(fmt.Sprintf("%d bytes is too small: at least %d (0 or absent: the default)", f.v, f.least), "http", f.key))
		}
	}
	return append(errs, c.validateWaiting()...)
}
