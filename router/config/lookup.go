package config

import (
	"fmt"
	"strings"
)

// HTTPLookup is the API's lookup store: every instance keeps a view of
// every intent's result and pending state, materialised from the results,
// timeouts and pending topics, so that any instance answers for any intent
// (api/lookup).
type HTTPLookup struct {
	// Dir is the store's directory, one per instance (a second process on
	// the same directory is refused). It survives restarts: the store
	// resumes from where it stopped. Default "": a temporary directory
	// deleted at exit, so every start rebuilds the store from the topics.
	Dir string `yaml:"dir"`
	// CacheMB is the store's block cache, in MiB: its memory, however many
	// results it holds. Default 16.
	CacheMB int `yaml:"cache_mb"`
}

// DefaultLookupCacheMB is http.lookup.cache_mb's default.
const DefaultLookupCacheMB = 16

func (c *Config) setLookupDefaults() {
	if c.HTTP.Lookup.CacheMB == 0 {
		c.HTTP.Lookup.CacheMB = DefaultLookupCacheMB
	}
}

func (c *Config) validateLookup(add func(string, ...string)) {
	if d := c.HTTP.Lookup.Dir; d != "" && strings.TrimSpace(d) != d {
		add(fmt.Sprintf("%q begins or ends with spaces", d), "http", "lookup", "dir")
	}
	switch mb := c.HTTP.Lookup.CacheMB; {
	case mb < 1:
		add("must be at least 1", "http", "lookup", "cache_mb")
	case mb > 1<<16:
		add(fmt.Sprintf("%d MiB is more than the 65536 (64 GiB) allowed", mb), "http", "lookup", "cache_mb")
	}
}
