package kafkaio

import (
	"context"
	"fmt"
	"time"

	"github.com/switchboard-mcp/switchboard/contexts"
	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// SnapshotReader reads the compacted context-snapshot topic for a
// contexts.Store.
type SnapshotReader struct {
	Settings Settings
	Topic    string
}

var _ contexts.Reader = SnapshotReader{}

// ReadSnapshots implements contexts.Reader with Read: the whole topic from
// its beginning, then forever.
func (r SnapshotReader) ReadSnapshots(ctx context.Context, apply func(key, value []byte), caughtUp func()) error {
	reading := Reading{Topics: []string{r.Topic}, From: FromBeginning(), OnCaughtUp: caughtUp}
	return Read(ctx, r.Settings, reading, func(rec *port.Record) error {
		if len(rec.Key) > 0 {
			apply(rec.Key, rec.Value)
		}
		return nil
	})
}

// SnapshotSender produces context snapshots to the snapshot topic, keyed by
// contexts.SnapshotKey (the entity id, or tenant and entity id), for a
// contexts.Publisher. It is safe for concurrent use.
type SnapshotSender struct {
	p     *Producer
	codec *schemas.Codec
	topic string
}

var _ contexts.Sender = (*SnapshotSender)(nil)

// NewSnapshotSender creates the producer.
func NewSnapshotSender(s Settings, codec *schemas.Codec, topic string) (*SnapshotSender, error) {
	p, err := NewProducer(s)
	if err != nil {
		return nil, err
	}
	return &SnapshotSender{p: p, codec: codec, topic: topic}, nil
}

// SendSnapshot publishes one snapshot and waits for the broker's
// acknowledgement; the record is stamped with the snapshot's time.
func (k *SnapshotSender) SendSnapshot(ctx context.Context, snap *schemas.ContextSnapshot) error {
	value, err := k.codec.Encode(k.topic, snap)
	if err != nil {
		return fmt.Errorf("kafkaio: encoding the snapshot of %s: %w", snap.EntityID, err)
	}
	key := contexts.SnapshotKey(intents.TenantOf(snap.Tenant), snap.EntityID)
	return k.p.Send(ctx, k.topic, []byte(key), value, nil, time.UnixMilli(snap.SnapshotTs))
}

// Close flushes and releases the producer.
func (k *SnapshotSender) Close() { k.p.Close(5 * time.Second) }

// EventReader reads an events topic for a contexts.Aggregation.
type EventReader struct {
	Settings Settings
	Topic    string
}

var _ contexts.EventReader = EventReader{}

// ReadEvents implements contexts.EventReader with Read, from since (the
// beginning if zero), forever; tombstones are skipped.
func (r EventReader) ReadEvents(ctx context.Context, since time.Time, caughtUp func(), fn func(value []byte, timestampMs int64) error) error {
	reading := Reading{Topics: []string{r.Topic}, From: FromTime(since), OnCaughtUp: caughtUp}
	return Read(ctx, r.Settings, reading, func(rec *port.Record) error {
		if rec.Value == nil {
			return nil
		}
		return fn(rec.Value, rec.TimestampMs)
	})
}
