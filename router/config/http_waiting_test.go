package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/router/config"
)

func TestHTTPMaxWaitingDefaultsAndErrors(t *testing.T) {
	for _, tc := range []struct {
		yaml           string
		max, perTenant int
	}{
		{"", config.DefaultMaxWaiting, config.DefaultMaxWaiting / 2},
		{"http: {max_waiting: 100}\n", 100, 50},
		{"http: {max_waiting: 1}\n", 1, 1},
		{"http: {max_waiting: 100, max_waiting_per_tenant: 100}\n", 100, 100},
	} {
		c, err := config.Parse("sb.yaml", []byte(tc.yaml+routes), nil)
		if err != nil || c.HTTP.MaxWaiting != tc.max || c.HTTP.MaxWaitingPerTenant != tc.perTenant {
			t.Errorf("%q: %d, %d per tenant, want %d, %d (%v)", tc.yaml, c.HTTP.MaxWaiting, c.HTTP.MaxWaitingPerTenant, tc.max, tc.perTenant, err)
		}
	}
	for _, tc := range []struct{ yaml, want string }{
		{"http:\n  max_waiting: -1\n", `sb.yaml:2: http.max_waiting: must not be negative`},
		{"http:\n  max_waiting_per_tenant: -1\n", `sb.yaml:2: http.max_waiting_per_tenant: must not be negative`},
		{"http:\n  max_waiting: 10\n  max_waiting_per_tenant: 11\n", `sb.yaml:3: http.max_waiting_per_tenant: 11 is more than max_waiting 10`},
		{"http:\n  max_waiting: many\n", `sb.yaml:2`},
	} {
		_, err := config.Parse("sb.yaml", []byte(tc.yaml+routes), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, config.ErrInvalid) {
			t.Errorf("%q: error\n%v\nwant %s", tc.yaml, err, tc.want)
		}
	}
}

func TestHTTPMCPMaxSessionsDefaultsAndErrors(t *testing.T) {
	for _, tc := range []struct {
		yaml           string
		max, perTenant int
	}{
		{"", config.DefaultMaxMCPSessions, config.DefaultMaxMCPSessions / 2},
		{"http: {mcp: {max_sessions: 10}}\n", 10, 5},
		{"http: {mcp: {max_sessions: 10, max_sessions_per_tenant: 10}}\n", 10, 10},
	} {
		c, err := config.Parse("sb.yaml", []byte(tc.yaml+routes), nil)
		if err != nil || c.HTTP.MCP.MaxSessions != tc.max || c.HTTP.MCP.MaxSessionsPerTenant != tc.perTenant {
			t.Errorf("%q: %d, %d per tenant, want %d, %d (%v)", tc.yaml, c.HTTP.MCP.MaxSessions, c.HTTP.MCP.MaxSessionsPerTenant, tc.max, tc.perTenant, err)
		}
	}
	for _, tc := range []struct{ yaml, want string }{
		{"http:\n  mcp:\n    max_sessions: -1\n", `sb.yaml:3: http.mcp.max_sessions: must not be negative (0 or absent: the default, 4096)`},
		{"http:\n  mcp:\n    max_sessions_per_tenant: -1\n", `sb.yaml:3: http.mcp.max_sessions_per_tenant: must not be negative`},
		{"http:\n  mcp:\n    max_sessions: 10\n    max_sessions_per_tenant: 11\n", `sb.yaml:4: http.mcp.max_sessions_per_tenant: 11 is more than max_sessions 10`},
		{"http:\n  mcp: {max_sessions: lots}\n", `sb.yaml:2`},
	} {
		_, err := config.Parse("sb.yaml", []byte(tc.yaml+routes), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, config.ErrInvalid) {
			t.Errorf("%q: error\n%v\nwant %s", tc.yaml, err, tc.want)
		}
	}
}

func TestHTTPMaxWaitingBytesDefaultsAndErrors(t *testing.T) {
	for _, tc := range []struct {
		yaml           string
		max, perTenant int64
	}{
		{"", config.DefaultMaxWaitingBytes, config.DefaultMaxWaitingBytes / 2},
		{"http: {max_waiting_bytes: 1048576}\n", 1 << 20, 512 << 10},
		{"http: {max_waiting_bytes: 65536}\n", 64 << 10, 64 << 10},
		{"http: {max_waiting_bytes: 1048576, max_waiting_bytes_per_tenant: 1048576}\n", 1 << 20, 1 << 20},
	} {
		c, err := config.Parse("sb.yaml", []byte(tc.yaml+routes), nil)
		if err != nil || c.HTTP.MaxWaitingBytes != tc.max || c.HTTP.MaxWaitingBytesPerTenant != tc.perTenant {
			t.Errorf("%q: %d, %d per tenant, want %d, %d (%v)", tc.yaml, c.HTTP.MaxWaitingBytes, c.HTTP.MaxWaitingBytesPerTenant, tc.max, tc.perTenant, err)
		}
	}
	for _, tc := range []struct{ yaml, want string }{
		{"http:\n  max_waiting_bytes: -1\n", `sb.yaml:2: http.max_waiting_bytes: must not be negative`},
		{"http:\n  max_waiting_bytes: 100\n", `sb.yaml:2: http.max_waiting_bytes: 100 bytes is too small: at least 65536`},
		{"http:\n  max_waiting_bytes_per_tenant: -5\n", `sb.yaml:2: http.max_waiting_bytes_per_tenant: must not be negative`},
		{"http:\n  max_waiting_bytes: 1048576\n  max_waiting_bytes_per_tenant: 2097152\n", `sb.yaml:3: http.max_waiting_bytes_per_tenant: 2097152 is more than max_waiting_bytes 1048576`},
	} {
		_, err := config.Parse("sb.yaml", []byte(tc.yaml+routes), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, config.ErrInvalid) {
			t.Errorf("%q: error\n%v\nwant %s", tc.yaml, err, tc.want)
		}
	}
}

func TestHTTPMaxReadingBytesAndConnectionsDefaultsAndErrors(t *testing.T) {
	for _, tc := range []struct {
		yaml           string
		max, perTenant int64
		conns          int
	}{
		{"", config.DefaultMaxReadingBytes, config.DefaultMaxReadingBytes / 2, 0},
		{"http: {max_reading_bytes: 1048576, max_connections: 100}\n", 1 << 20, 512 << 10, 100},
		{"http: {max_reading_bytes: 1048576, max_reading_bytes_per_tenant: 1048576}\n", 1 << 20, 1 << 20, 0},
	} {
		c, err := config.Parse("sb.yaml", []byte(tc.yaml+routes), nil)
		if err != nil || c.HTTP.MaxReadingBytes != tc.max || c.HTTP.MaxReadingBytesPerTenant != tc.perTenant || c.HTTP.MaxConnections != tc.conns {
			t.Errorf("%q: %d, %d per tenant, %d connections, want %d, %d, %d (%v)", tc.yaml, c.HTTP.MaxReadingBytes, c.HTTP.MaxReadingBytesPerTenant, c.HTTP.MaxConnections, tc.max, tc.perTenant, tc.conns, err)
		}
	}
	for _, tc := range []struct{ yaml, want string }{
		{"http:\n  max_reading_bytes: -1\n", `sb.yaml:2: http.max_reading_bytes: must not be negative`},
		{"http:\n  max_reading_bytes: 100\n", `sb.yaml:2: http.max_reading_bytes: 100 bytes is too small: at least 65536`},
		{"http:\n  max_reading_bytes: 1048576\n  max_reading_bytes_per_tenant: 2097152\n", `sb.yaml:3: http.max_reading_bytes_per_tenant: 2097152 is more than max_reading_bytes 1048576`},
		{"http:\n  max_connections: -1\n", `sb.yaml:2: http.max_connections: must not be negative`},
		{"http:\n  admin_listen: \"9090\"\n", `sb.yaml:2: http.admin_listen: "9090" is not host:port`},
		{"http:\n  listen: 127.0.0.1:8080\n  admin_listen: 127.0.0.1:8080\n", `sb.yaml:3: http.admin_listen: "127.0.0.1:8080" is http.listen's address`},
	} {
		_, err := config.Parse("sb.yaml", []byte(tc.yaml+routes), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, config.ErrInvalid) {
			t.Errorf("%q: error\n%v\nwant %s", tc.yaml, err, tc.want)
		}
	}
}
