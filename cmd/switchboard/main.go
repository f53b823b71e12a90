// Command switchboard is the intent routing broker. (Wiring in progress.)
package main

import (
	_ "github.com/confluentinc/confluent-kafka-go/v2/kafka"
	_ "github.com/go-chi/chi/v5"
	_ "github.com/gorilla/websocket"
	_ "github.com/hamba/avro/v2"
	_ "github.com/jonboulle/clockwork"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/prometheus/client_golang/prometheus/testutil"
	_ "github.com/twmb/franz-go/pkg/kfake"
	_ "github.com/twmb/franz-go/pkg/sr/srfake"
	_ "go.yaml.in/yaml/v3"
	_ "go.uber.org/goleak"
)

func main() {}
