// Package config owns Switchboard's YAML configuration file: its shape, its
// defaults, the environment variables that override it, and its validation.
// Every error names the file, the line and the key at fault, so an operator can
// go straight to the mistake.
//
// It also derives what the configuration implies for the cluster: the topics
// and their settings (TopicPlans) and the least ACLs of the router, the API
// and each agent (ACLs), which 'switchboard topics' creates and applies.
//
// It does not open Kafka connections or start anything: cmd/switchboard reads a
// Config and builds the components from it.
package config
