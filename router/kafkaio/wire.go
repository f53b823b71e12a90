package kafkaio

import (
	"context"
	"time"

	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// Parts is what router.New needs to run on Kafka: the Source and Sink it
// takes, and the readers of its WithRestorer and WithFallbackFeed options.
// kafkaio builds them without importing the router.
type Parts struct {
	Source     port.Source
	Sink       port.Sink
	Restorer   port.Restorer     // the pending changelog, for router.WithRestorer
	Feed       port.FallbackFeed // the fallback-cache topic, for router.WithFallbackFeed
	InstanceID string            // cfg's router.instance_id, or a random one
}

// RouterParts builds what router.New needs to run on Kafka as cfg says: the
// consumer (with static membership when router.instance_id is set), the sink
// (transactional for exactly_once), the pending-changelog restorer and the
// fallback-cache feed.
func RouterParts(ctx context.Context, s Settings, cfg *config.Config, codec *schemas.Codec) (Parts, error) {
	instanceID := cfg.Router.InstanceID
	static := instanceID != ""
	if !static {
		instanceID = "r-" + tailID()
	}
	eos := cfg.Router.Delivery == config.ExactlyOnce
	so := SourceOptions{Transactional: eos, StatsInterval: cfg.Router.LagInterval.D(), PrefetchBytes: cfg.Memory().Prefetch}
	if static {
		so.InstanceID = instanceID
	}
	source, err := NewSource(s, cfg.Kafka.GroupID, []string{cfg.Topics.Requests, cfg.Topics.Responses}, so)
	if err != nil {
		return Parts{}, err
	}
	var sink port.Sink
	if eos {
		ictx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		sink, err = NewTxSink(ictx, s, cfg.Kafka.GroupID+"."+instanceID)
	} else {
		sink, err = NewSink(s, 10*time.Second)
	}
	if err != nil {
		_ = source.Close()
		return Parts{}, err // its own errors say kafkaio: already
	}
	return Parts{
		Source: source, Sink: sink,
		Restorer:   &Changelog{Settings: s, Topic: cfg.Topics.Pending, Codec: codec},
		Feed:       FallbackFeed(s, cfg.Topics.FallbackCache, codec),
		InstanceID: instanceID,
	}, nil
}
