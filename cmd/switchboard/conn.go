package main

import (
	"flag"
	"log/slog"
	"os"

	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// defaultRegistry is where the command-line tools look for Avro schemas when
// they meet an Avro record and no registry is configured: where
// 'switchboard dev' serves one.
const defaultRegistry = "127.0.0.1:8081"

// conn holds the flags that say how a command-line tool reaches Switchboard.
type conn struct {
	config   *string
	brokers  *string
	registry *string
}

func connFlags(fs *flag.FlagSet) *conn {
	return &conn{
		config:   fs.String("config", "", "read brokers, topics and registry from this YAML `file`"),
		brokers:  fs.String("brokers", "", "Kafka bootstrap `servers` (default: the config's, else $SWITCHBOARD_KAFKA_BOOTSTRAP_SERVERS, else localhost:9092)"),
		registry: fs.String("registry", "", "the Schema Registry `URL`: Avro records are read through it, and written through it when the config names a registry (default: the config's schema_registry.url, else http://"+defaultRegistry+", where 'switchboard dev' serves one)"),
	}
}

// load returns the configuration the flags describe: the file's, or the
// defaults, with --brokers and --registry applied.
func (c *conn) load() (*config.Config, error) {
	var cfg *config.Config
	var err error
	if *c.config != "" {
		cfg, err = config.Load(*c.config)
	} else {
		// No file: the defaults plus a placeholder route, since a config
		// needs one; tools only use the Kafka and topic settings.
		cfg, err = config.Parse("defaults", []byte("agents: {a: {}}\nintents: {a: {agent: a}}\n"), os.LookupEnv)
	}
	if err != nil {
		return nil, err
	}
	if *c.brokers != "" {
		cfg.Kafka.BootstrapServers = *c.brokers
	}
	return cfg, nil
}

// codec reads both encodings, fetching Avro schemas from the registry of
// --registry, else of the config, else the default; it writes Avro only when
// the config names a registry, JSON otherwise (the router reads both).
func (c *conn) codec(cfg *config.Config) (*schemas.Codec, error) {
	url, write := c.registryURL(cfg), schemas.EncodingAvro
	if cfg.SchemaRegistry.URL == "" {
		write = schemas.EncodingJSON
	}
	var opts []schemas.RegistryOption
	if cfg.SchemaRegistry.Username != "" {
		opts = append(opts, schemas.WithBasicAuth(cfg.SchemaRegistry.Username, cfg.SchemaRegistry.Password))
	}
	reg, err := schemas.NewRegistry(url, opts...)
	if err != nil {
		return nil, err
	}
	return schemas.NewCodec(schemas.WithRegistry(reg), schemas.WithDefaultEncoding(write))
}

// registryURL is the registry the tools read Avro records through: --registry,
// else the config's, else the default.
func (c *conn) registryURL(cfg *config.Config) string {
	switch {
	case *c.registry != "":
		return *c.registry
	case cfg.SchemaRegistry.URL != "":
		return cfg.SchemaRegistry.URL
	}
	return "http://" + defaultRegistry
}

// settings are the Kafka settings of a command-line tool's clients. They
// keep librdkafka's own log lines ("Connect to … failed", one every second)
// off the terminal: the tools say in one line what went wrong. librdkafka
// still logs at its default level into kafkaio, which reads a refused
// password or certificate from those lines (a *kafkaio.RefusedError);
// only their printing is dropped. With kafka.properties' log_level set,
// they are printed.
func (c *conn) settings(cfg *config.Config, clientID string) kafkaio.Settings {
	s := settingsOf(cfg, clientID)
	if _, set := s.Properties["log_level"]; !set {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	return s
}

// withDefaults is props with defs added where props does not set them; props
// itself is not changed.
func withDefaults(props, defs map[string]string) map[string]string {
	out := make(map[string]string, len(props)+len(defs))
	for k, v := range defs {
		out[k] = v
	}
	for k, v := range props {
		out[k] = v
	}
	return out
}
