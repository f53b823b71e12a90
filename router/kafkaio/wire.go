package kafkaio

import (
	"context"
	"time"

	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// RouterParts builds what router.New needs to run on Kafka as cfg says: the
// consumer (with static membership when router.instance_id is set), the sink
// (transactional for exactly_once), the pending-changelog restorer and the
// fallback-cache feed. instanceID is the id in use (cfg's, or a random one).
func RouterParts(ctx context.Context, s Settings, cfg *config.Config, codec *schemas.Codec) (src router.Source, sink router.Sink, opts []router.Option, instanceID string, err error) {
	instanceID = cfg.Router.InstanceID
	static := instanceID != ""
	if !static {
		instanceID = "r-" + tailID()
	}
	eos := cfg.Router.Delivery == config.ExactlyOnce
	so := SourceOptions{Transactional: eos, StatsInterval: cfg.Router.LagInterval.D()}
	if static {
		so.InstanceID = instanceID
	}
	source, err := NewSource(s, cfg.Kafka.GroupID, []string{cfg.Topics.Requests, cfg.Topics.Responses}, so)
	if err != nil {
		return nil, nil, nil, "", err
	}
	if eos {
		ictx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		sink, err = NewTxSink(ictx, s, cfg.Kafka.GroupID+"."+instanceID)
	} else {
		sink, err = NewSink(s, 10*time.Second)
	}
	if err != nil {
		_ = source.Close()
		return nil, nil, nil, "", err // its own errors say kafkaio: already
	}
	opts = []router.Option{
		router.WithRestorer(&Changelog{Settings: s, Topic: cfg.Topics.Pending, Codec: codec}),
		router.WithFallbackFeed(FallbackFeed(s, cfg.Topics.FallbackCache, codec)),
	}
	return source, sink, opts, instanceID, nil
}
