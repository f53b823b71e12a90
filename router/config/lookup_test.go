package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/router/config"
)

func TestHTTPLookupDefaultsAndErrors(t *testing.T) {
	c, err := config.Parse("sb.yaml", []byte(routes), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTP.Lookup.Dir != "" || c.HTTP.Lookup.CacheMB != config.DefaultLookupCacheMB {
		t.Fatalf("defaults: %+v", c.HTTP.Lookup)
	}
	c, err = config.Parse("sb.yaml", []byte("http:\n  lookup: {dir: /var/lib/sb, cache_mb: 64}\n"+routes), nil)
	if err != nil || c.HTTP.Lookup.Dir != "/var/lib/sb" || c.HTTP.Lookup.CacheMB != 64 {
		t.Fatalf("set: %+v %v", c.HTTP.Lookup, err)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"cache too small", "http:\n  lookup:\n    cache_mb: -1\n", `sb.yaml:3: http.lookup.cache_mb: must be at least 1`},
		{"cache too large", "http:\n  lookup:\n    cache_mb: 100000\n", `sb.yaml:3: http.lookup.cache_mb: 100000 MiB is more than`},
		{"dir with spaces", "http:\n  lookup:\n    dir: ' /tmp/x'\n", `sb.yaml:3: http.lookup.dir: " /tmp/x" begins or ends with spaces`},
		{"unknown key", "http:\n  lookup:\n    directory: /x\n", `sb.yaml:3: http.lookup.directory: unknown key "directory"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("sb.yaml", []byte(tc.yaml+routes), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("error:\n%v\nwant:\n%s", err, tc.want)
			}
		})
	}
}
