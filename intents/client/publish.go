package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// Publisher publishes intent requests. It is safe for concurrent use.
type Publisher struct {
	p     *kafkaio.Producer
	codec *schemas.Codec
	topic string
}

// NewPublisher publishes to the requests topic of the cluster s reaches.
func NewPublisher(s kafkaio.Settings, codec *schemas.Codec, requestsTopic string) (*Publisher, error) {
	p, err := kafkaio.NewProducer(s)
	if err != nil {
		return nil, err
	}
	return &Publisher{p: p, codec: codec, topic: requestsTopic}, nil
}

// Publish validates req, fills its intent_id when empty, and publishes it
// keyed by its id; it returns once the broker acknowledged it.
func (p *Publisher) Publish(ctx context.Context, req *schemas.IntentRequest) error {
	if req.IntentID == "" {
		req.IntentID = intents.NewID()
	}
	if err := intents.Validate(req); err != nil {
		return err
	}
	value, err := p.codec.Encode(p.topic, req)
	if err != nil {
		return fmt.Errorf("client: encoding the intent: %w", err)
	}
	var headers []port.Header
	if req.Traceparent != nil {
		headers = []port.Header{{Key: port.HeaderTraceparent, Value: []byte(*req.Traceparent)}}
	}
	return p.p.Send(ctx, p.topic, []byte(req.IntentID), value, headers, time.Time{})
}

// PublishIntent is Publish; it makes a Publisher an api.Publisher.
func (p *Publisher) PublishIntent(ctx context.Context, req *schemas.IntentRequest) error {
	return p.Publish(ctx, req)
}

// Cancel publishes a cancel record for intentID, an intent without a tenant,
// to the requests topic (key the id, header switchboard.control=cancel,
// value {"intent_id","reason"}) and returns once the broker acknowledged
// it. The router resolves the intent `cancelled` if it is still pending,
// and ignores the record otherwise. reason may be empty. An intent of a
// tenant is cancelled with PublishCancel.
func (p *Publisher) Cancel(ctx context.Context, intentID, reason string) error {
	return p.PublishCancel(ctx, intents.Cancel{IntentID: intentID, Reason: reason})
}

// PublishCancel publishes c as a cancel record, tenant included: the router
// cancels the intent of c.Tenant ("" for none) with c.IntentID, and no
// other tenant's. It makes a Publisher an api.Publisher: the API sets
// c.Tenant from the caller's credential.
func (p *Publisher) PublishCancel(ctx context.Context, c intents.Cancel) error {
	value, err := intents.MarshalCancel(c)
	if err != nil {
		return err
	}
	headers := []port.Header{{Key: intents.HeaderControl, Value: []byte(intents.ControlCancel)}}
	return p.p.Send(ctx, p.topic, []byte(c.IntentID), value, headers, time.Time{})
}

// Close flushes and releases the producer.
func (p *Publisher) Close() { p.p.Close(5 * time.Second) }

// Await reads the results topic from its current end, calls publish once it
// is reading (so the result cannot be missed), and returns the result of the
// intent (tenant, intentID), tenant "" for an intent without one: another
// tenant's intent of the same id is another intent, and its result is not
// this one's.
func Await(ctx context.Context, s kafkaio.Settings, codec *schemas.Codec, resultsTopic, tenant, intentID string, publish func() error) (*schemas.IntentResult, error) {
	var (
		res     *schemas.IntentResult
		pubErr  error
		found   = errors.New("found")
		tailCtx context.Context
	)
	tailCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	err := kafkaio.Read(tailCtx, s, kafkaio.Reading{Topics: []string{resultsTopic}, OnStart: func(kafkaio.Offsets) {
		if pubErr = publish(); pubErr != nil {
			cancel()
		}
	}}, func(rec *port.Record) error {
		if string(rec.Key) != intentID {
			return nil
		}
		var r schemas.IntentResult
		if err := codec.Decode(rec.Value, &r); err != nil {
			return fmt.Errorf("%w: %w", ErrUndecodableResult, err)
		}
		if r.IntentID != intentID || intents.TenantOf(r.Tenant) != tenant {
			return nil
		}
		res = &r
		return found
	})
	switch {
	case pubErr != nil:
		return nil, pubErr
	case res != nil:
		return res, nil
	case err != nil && !errors.Is(err, found):
		return nil, err
	}
	return nil, ErrNoResult
}
