package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/intents/client"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// benchAgent is a demo agent (client.DemoHandler: the service time, the
// error rate and the payloads' ignore directives) that also notes when each
// dispatch record was written and read and when each response was sent. It
// reads and answers the way client.Agent does.
type benchAgent struct {
	ph      *phase
	topic   string
	prod    *kafkaio.Producer
	handler client.Handler
	sem     chan struct{}
	wg      sync.WaitGroup
}

func (ph *phase) newAgent() (*benchAgent, error) {
	prod, err := kafkaio.NewProducer(ph.settingsOf(ph.cfg, "switchboard-bench-agent"))
	if err != nil {
		return nil, err
	}
	return &benchAgent{
		ph: ph, topic: ph.cfg.Agents[benchIntentType].Topic, prod: prod,
		handler: client.DemoHandler(benchIntentType, ph.o.ServiceTime, ph.o.ErrorRate, ph.clock),
		sem:     make(chan struct{}, 1<<17),
	}, nil
}

func (a *benchAgent) run(ctx context.Context) error {
	defer a.wg.Wait()
	ph := a.ph
	warned := false
	return kafkaio.Read(ctx, ph.kafka, kafkaio.Reading{Topics: []string{a.topic}, From: kafkaio.FromBeginning(), Group: ph.cfg.Kafka.GroupID + "-agent"}, func(rec *port.Record) error {
		now := ph.clock.Now()
		r := ph.rowOf(rec.Key)
		if r != nil {
			r.disp.Store(ph.msTs(rec.TimestampMs))
			r.dispSeen.Store(ph.us(now))
		}
		req, err := ph.dispatched(rec.Value)
		if err != nil {
			if !warned {
				ph.log.Warn("bench agent: undecodable request skipped", "error", err)
				warned = true
			}
			return nil
		}
		select {
		case a.sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			defer func() { <-a.sem }()
			a.serve(ctx, req, r)
		}()
		return nil
	})
}

// dispatched decodes what the agent reads: an AgentRequest from the router,
// or in the baseline the IntentRequest forwarded as it is.
func (ph *phase) dispatched(value []byte) (*schemas.AgentRequest, error) {
	if ph.kind == phaseBaseline {
		var ir schemas.IntentRequest
		if err := ph.codec.Decode(value, &ir); err != nil {
			return nil, err
		}
		return &schemas.AgentRequest{IntentID: ir.IntentID, IntentType: ir.IntentType, Agent: benchIntentType, Payload: ir.Payload, Attempt: 1}, nil
	}
	var req schemas.AgentRequest
	if err := ph.codec.Decode(value, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

func (a *benchAgent) serve(ctx context.Context, req *schemas.AgentRequest, r *row) {
	ph := a.ph
	answer, err := a.handler(ctx, req)
	if ctx.Err() != nil || errors.Is(err, client.ErrNoAnswer) {
		return
	}
	now := ph.clock.Now()
	ms := now.UnixMilli()
	resp := &schemas.AgentResponse{RequestID: req.IntentID, Agent: benchIntentType, Status: schemas.StatusOK, ProducedAt: &ms}
	if err != nil {
		resp.Status = schemas.StatusError
		resp.Error = &schemas.ErrorInfo{Code: "agent_error", Message: err.Error(), Retryable: true}
	} else {
		resp.Answer = &answer
	}
	value, err := ph.codec.Encode(ph.cfg.Topics.Responses, resp)
	if err != nil {
		ph.log.Warn("bench agent: encoding a response", "error", err)
		return
	}
	if r != nil {
		r.resp.Store(ph.msTs(ms))
		r.respSent.Store(ph.us(now))
	}
	if err := a.prod.Send(ctx, ph.cfg.Topics.Responses, []byte(req.IntentID), value, nil, now); err != nil && ctx.Err() == nil {
		ph.log.Warn("bench agent: answering", "intent_id", req.IntentID, "error", err)
	}
}

// forwardedAt is the opaque of one forwarded record: the offset to store
// once the copy is acknowledged.
type forwardedAt struct {
	tp   port.TopicPartition
	next int64
}

// forward is the baseline's hop: a plain consume-produce loop from one topic
// to another with the router's own consumer and producer (kafkaio.Source
// and kafkaio.Sink, the at_least_once settings: offsets stored once the copy
// is acknowledged, committed automatically). It copies key, value and
// headers as they are.
func (ph *phase) forward(ctx context.Context, groupSuffix, from, to string) error {
	src, err := kafkaio.NewSource(ph.kafka, ph.cfg.Kafka.GroupID+groupSuffix, []string{from}, kafkaio.SourceOptions{})
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }() // leaving the group: nothing to do about an error
	sink, err := kafkaio.NewSink(ph.kafka, 10*time.Second)
	if err != nil {
		return err
	}
	defer func() { _ = sink.Close() }() // undelivered copies only mean missing results, which the report shows
	acksDone := make(chan struct{})
	go func() {
		defer close(acksDone)
		for {
			select {
			case <-ctx.Done():
				return
			case a := <-sink.Acks():
				if f, ok := a.Opaque.(*forwardedAt); ok && a.Err == nil {
					_ = src.StoreOffset(f.tp, f.next)
				}
			}
		}
	}()
	defer func() { <-acksDone }()
	for ctx.Err() == nil {
		switch e := src.Poll(100).(type) {
		case *port.Record:
			out := &port.Output{Topic: to, Key: e.Key, Value: e.Value, Headers: e.Headers}
			if err := sink.Produce(out, &forwardedAt{port.TopicPartition{Topic: e.Topic, Partition: e.Partition}, e.Offset + 1}); err != nil {
				return fmt.Errorf("forwarding to %s: %w", to, err)
			}
		case *port.FatalError:
			return e
		}
	}
	return nil
}

// deleteTopics removes the phase's topics and consumer groups from the
// cluster; a failure is only reported.
func (ph *phase) deleteTopics(plans []config.TopicPlan) {
	cm := kafka.ConfigMap{"bootstrap.servers": ph.kafka.Bootstrap, "enable.metrics.push": false}
	for k, v := range ph.kafka.Properties {
		cm[k] = v
	}
	a, err := kafka.NewAdminClient(&cm)
	if err != nil {
		fmt.Fprintf(ph.stderr, "bench: topics bench.%s.* were not deleted: %v\n", ph.id, err)
		return
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := make([]string, len(plans))
	for i, p := range plans {
		names[i] = p.Name
	}
	if _, err := a.DeleteTopics(ctx, names); err != nil {
		fmt.Fprintf(ph.stderr, "bench: topics bench.%s.* were not deleted: %v\n", ph.id, err)
	}
	g := ph.cfg.Kafka.GroupID
	_, _ = a.DeleteConsumerGroups(ctx, []string{g, g + "-agent", g + "-fwd-requests", g + "-fwd-responses"})
}
