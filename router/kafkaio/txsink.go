package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router"
)

// TxSink is the router's transactional producer (exactly_once): one per
// instance, under a transactional.id that stays the same across the
// instance's restarts, so a restarted instance aborts what its previous life
// left open.
type TxSink struct {
	settings Settings
	txID     string

	p      *kafka.Producer // replaced by Reset, from the event loop only
	wg     sync.WaitGroup
	acks   chan router.Ack
	failed atomic.Int64
}

var _ router.TxSink = (*TxSink)(nil)

// NewTxSink creates the producer and initialises its transactions.
func NewTxSink(ctx context.Context, s Settings, transactionalID string) (*TxSink, error) {
	k := &TxSink{settings: s, txID: transactionalID, acks: make(chan router.Ack)}
	if err := k.open(ctx); err != nil {
		return nil, err
	}
	return k, nil
}

func (k *TxSink) open(ctx context.Context) error {
	owned := kafka.ConfigMap{"transactional.id": k.txID}
	if _, set := k.settings.Properties["transaction.timeout.ms"]; !set {
		// A transaction left open by an instance that died blocks
		// read_committed readers of its partitions until it times out
		// (unless the instance restarts with the same id first).
		owned["transaction.timeout.ms"] = 20000
	}
	for key, v := range routerProducerSettings(k.settings) {
		owned[key] = v
	}
	cm, err := k.settings.configMapFor("producer", owned)
	if err != nil {
		return err
	}
	p, err := kafka.NewProducer(cm)
	if err != nil {
		return fmt.Errorf("kafkaio: creating the transactional producer: %w", err)
	}
	// Delivery reports must be served while transactions commit; failures
	// also fail the commit, so they are only counted here.
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		for ev := range p.Events() {
			if m, ok := ev.(*kafka.Message); ok && m.TopicPartition.Error != nil {
				k.failed.Add(1)
			}
		}
	}()
	if err := p.InitTransactions(ctx); err != nil {
		p.Close()
		k.wg.Wait()
		return fmt.Errorf("kafkaio: initialising transactions for %s: %w", k.txID, err)
	}
	k.p = p
	return nil
}

// Begin implements router.TxSink.
func (k *TxSink) Begin() error { return txnError(k.p.BeginTransaction()) }

// Produce implements router.Sink.
func (k *TxSink) Produce(o *router.Output, _ any) error {
	msg := &kafka.Message{
		TopicPartition: kafka.TopicPartition{Topic: &o.Topic, Partition: kafka.PartitionAny},
		Key:            o.Key,
		Value:          o.Value,
	}
	if o.Partition != nil {
		msg.TopicPartition.Partition = *o.Partition
	}
	for _, h := range o.Headers {
		msg.Headers = append(msg.Headers, kafka.Header{Key: h.Key, Value: h.Value})
	}
	for try := 0; ; try++ {
		err := k.p.Produce(msg, nil)
		var kerr kafka.Error
		if err == nil || !errors.As(err, &kerr) || kerr.Code() != kafka.ErrQueueFull || try == 100 {
			return txnError(err)
		}
		k.p.Flush(10)
	}
}

// Commit implements router.TxSink.
func (k *TxSink) Commit(ctx context.Context, offsets map[router.TopicPartition]int64, group any) error {
	if len(offsets) > 0 {
		gm, ok := group.(*kafka.ConsumerGroupMetadata)
		if !ok {
			return &router.TxnError{Err: fmt.Errorf("kafkaio: group metadata of type %T", group), Abortable: true}
		}
		tps := make([]kafka.TopicPartition, 0, len(offsets))
		for tp, off := range offsets {
			tps = append(tps, kafka.TopicPartition{Topic: &tp.Topic, Partition: tp.Partition, Offset: kafka.Offset(off)})
		}
		if err := k.p.SendOffsetsToTransaction(ctx, tps, gm); err != nil {
			return txnError(err)
		}
	}
	return txnError(k.p.CommitTransaction(ctx))
}

// Abort implements router.TxSink.
func (k *TxSink) Abort(ctx context.Context) error { return txnError(k.p.AbortTransaction(ctx)) }

// Reset implements router.TxSink.
func (k *TxSink) Reset() error {
	k.p.Close()
	k.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 60e9)
	defer cancel()
	return k.open(ctx)
}

// Acks implements router.Sink: a TxSink reports nothing there (its
// deliveries are settled by Commit).
func (k *TxSink) Acks() <-chan router.Ack { return k.acks }

// Close implements router.Sink: it aborts an open transaction (the router
// commits before closing) and releases the producer.
func (k *TxSink) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10e9)
	defer cancel()
	_ = k.p.AbortTransaction(ctx) // nothing open is the usual case: its error is expected
	k.p.Close()
	k.wg.Wait()
	return nil
}

// txnError classifies librdkafka's transaction errors for the router.
func txnError(err error) error {
	if err == nil {
		return nil
	}
	var kerr kafka.Error
	if !errors.As(err, &kerr) {
		return &router.TxnError{Err: err, Abortable: true}
	}
	return &router.TxnError{Err: err, Retriable: kerr.IsRetriable(), Abortable: kerr.TxnRequiresAbort(), Fatal: kerr.IsFatal()}
}
