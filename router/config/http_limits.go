package config

import "fmt"

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
	return errs
}
