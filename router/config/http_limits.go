package config

import "fmt"

// DefaultMaxWaiting is http.max_waiting's default, the API's
// (api.DefaultMaxWaiting): about a second of what a 2-core host answers
// through the API at its knee (3,000-4,000 intents/s, BENCHMARKS.md), and a
// fifth of serve's 20,000 descriptors. http.max_waiting_per_tenant's
// default is half of http.max_waiting.
const DefaultMaxWaiting = 4096

// setWaitingDefaults sets http.max_waiting and max_waiting_per_tenant when
// absent (0).
func (c *Config) setWaitingDefaults() {
	h := &c.HTTP
	if h.MaxWaiting == 0 {
		h.MaxWaiting = DefaultMaxWaiting
	}
	if h.MaxWaitingPerTenant == 0 && h.MaxWaiting > 0 {
		h.MaxWaitingPerTenant = max(1, h.MaxWaiting/2)
	}
}

// validateWaiting checks the waiting bounds: positive, and a tenant's no
// larger than the instance's.
func (c *Config) validateWaiting() Errors {
	var errs Errors
	h := c.HTTP
	if h.MaxWaiting < 0 {
		errs = append(errs, c.ErrorAt("must not be negative (0 or absent: the default, 4096)", "http", "max_waiting"))
	}
	switch {
	case h.MaxWaitingPerTenant < 0:
		errs = append(errs, c.ErrorAt("must not be negative (0 or absent: half of max_waiting)", "http", "max_waiting_per_tenant"))
	case h.MaxWaiting > 0 && h.MaxWaitingPerTenant > h.MaxWaiting:
		errs = append(errs, c.ErrorAt(fmt.Sprintf("%d is more than max_waiting %d: a tenant's bound is a share of the instance's", h.MaxWaitingPerTenant, h.MaxWaiting), "http", "max_waiting_per_tenant"))
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
