package config

import "fmt"

// Progress bounds what one agent can push as progress for one intent: the
// router publishes an agent's progress messages (IntentProgress on
// topics.progress) until either cap is reached, then drops the rest of that
// intent's progress and counts it. The result is never dropped.
type Progress struct {
	// MaxPerIntent is how many progress records one intent may publish.
	// Default 4096.
	MaxPerIntent int `yaml:"max_per_intent"`
	// MaxBytes is how many bytes of message and partial one intent's
	// progress may carry in all. Default 1048576 (1 MiB).
	MaxBytes int `yaml:"max_bytes"`
}

// Progress defaults.
const (
	DefaultProgressMaxPerIntent = 4096
	DefaultProgressMaxBytes     = 1 << 20
)

func (c *Config) setProgressDefaults() {
	for _, it := range c.Intents {
		if it.Progress.MaxPerIntent == 0 {
			it.Progress.MaxPerIntent = DefaultProgressMaxPerIntent
		}
		if it.Progress.MaxBytes == 0 {
			it.Progress.MaxBytes = DefaultProgressMaxBytes
		}
	}
}

func (c *Config) validateProgress(add func(msg string, path ...string)) {
	for name, it := range c.Intents {
		if it.Progress.MaxPerIntent < 1 {
			add(fmt.Sprintf("%d: must be at least 1 (absent: %d)", it.Progress.MaxPerIntent, DefaultProgressMaxPerIntent), "intents", name, "progress", "max_per_intent")
		}
		if it.Progress.MaxBytes < 1 {
			add(fmt.Sprintf("%d: must be at least 1 (absent: %d)", it.Progress.MaxBytes, DefaultProgressMaxBytes), "intents", name, "progress", "max_bytes")
		}
	}
}
