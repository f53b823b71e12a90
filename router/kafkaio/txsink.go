package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/port"
)

// TxSink is the router's transactional producer (exactly_once): one per
// instance, under transactional.ids that stay the same across the
// instance's restarts, so a restarted instance aborts what its previous life
// left open.
//
// It holds two producers (lanes), <id> and <id>.b, and each transaction
// goes to the other lane than the last. When CommitTransaction returns, the
// broker has decided the commit but still writes its markers for a few
// (on a busy host, tens of) ms, and refuses the same transactional.id a
// new transaction meanwhile (CONCURRENT_TRANSACTIONS). Alternating lets the
// next transaction start at once while the previous one completes. Only one
// transaction is open and at most one is being committed at a time: a
// transaction's offsets are sent after the previous one's commit was
// decided, so the group's committed offsets never go back, and both lanes
// carry the group metadata that fences a zombie.
//
// A third producer, neither transactional nor idempotent, sends what
// ProduceAtOnce is given (the router's dispatches) outside the
// transactions, with NewAnswerProducer's settings (one request in flight,
// acks=all; librdkafka's idempotent producer busy-loops while a broker is
// away, librdkafka#3692): its delivery reports come back on Acks.
type TxSink struct {
	settings Settings
	txID     string

	lanes   [2]*txLane // replaced by Reset, from the event loop only
	cur     int        // the lane of the open (or last) transaction
	now     *kafka.Producer
	nowW    *watch
	nowWG   sync.WaitGroup
	acks    chan port.Ack // the at-once producer's delivery reports
	closing chan struct{}
	failed  atomic.Int64
	grace   time.Duration // stuckGrace unless set (tests)
}

// txLane is one transactional producer and its delivery-report reader.
type txLane struct {
	p  *kafka.Producer
	w  *watch
	wg sync.WaitGroup
	// stuck is set when a transactional call on p did not return in time
	// (see bounded): the lane is abandoned, never called or closed again.
	stuck bool
}

// stuckGrace is how long past its context's deadline a transactional call
// may still run before its lane is given up as stuck. librdkafka's
// send_offsets_to_transaction ignores its timeout while the group
// coordinator is down (librdkafka#5456) and can wait for good when the
// cached coordinator was decommissioned (librdkafka#5511, seen in the drill
// after a broker restart: a router sat in it for five minutes, its
// rebalance never ended and its partitions were served by nobody).
const stuckGrace = 5 * time.Second

// bounded runs call and returns its error, or ErrTransactionStuck once ctx
// is done and call has not returned grace later. A call that never returns
// keeps its goroutine: the caller must abandon whatever it uses.
func bounded(ctx context.Context, grace time.Duration, call func() error) error {
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return ErrTransactionStuck
	}
}

// call runs a blocking transactional call on the current lane, bounded: a
// call that outlives its deadline by stuckGrace abandons the lane and is a
// fatal TxnError, so the router replaces both lanes (Reset) and the new
// producers' InitTransactions fence the abandoned one.
func (k *TxSink) call(ctx context.Context, what string, fn func(p *kafka.Producer) error) error {
	l := k.lanes[k.cur]
	grace := stuckGrace
	if k.grace > 0 {
		grace = k.grace
	}
	err := bounded(ctx, grace, func() error { return fn(l.p) })
	if errors.Is(err, ErrTransactionStuck) {
		l.stuck = true
		return &port.TxnError{Err: fmt.Errorf("%w: %s on %s ran %v past its deadline; the producer is abandoned and replaced", err, what, k.txID, grace), Fatal: true}
	}
	return txnError(err)
}

// TxSink is not a port.TxRegistrar: staging the offsets before a
// transaction's first output cost the event loop a second AddOffsetsToTxn
// and TxnOffsetCommit round trip per transaction, on the dispatch's path,
// to spare a lane reused before its last transaction completed librdkafka's
// 20 ms retry of AddPartitionsToTxn. With two lanes a lane is reused one
// whole transaction after its last commit, by when the broker has mostly
// written that commit's markers (BENCHMARKS.md, issue 16: "where the
// milliseconds go").
var _ port.TxSink = (*TxSink)(nil)

// NewTxSink creates the producers and initialises their transactions.
func NewTxSink(ctx context.Context, s Settings, transactionalID string) (*TxSink, error) {
	k := &TxSink{settings: s, txID: transactionalID, acks: make(chan port.Ack, 65536), closing: make(chan struct{})}
	if err := k.open(ctx); err != nil {
		return nil, err
	}
	now, w, err := newProducer(s, "producer", atOnceProducerSettings(s))
	if err != nil {
		for _, l := range k.lanes {
			l.close()
		}
		return nil, err
	}
	k.now, k.nowW = now, w
	k.nowWG.Add(1)
	go k.reports()
	return k, nil
}

// atOnceProducerSettings are the at-once producer's: NewAnswerProducer's,
// with the router producers' bound on what librdkafka queues.
func atOnceProducerSettings(s Settings) kafka.ConfigMap {
	m := routerProducerSettings(s)
	m["enable.idempotence"] = false
	m["max.in.flight.requests.per.connection"] = 1
	return m
}

// reports turns the at-once producer's delivery reports into Acks until it
// closes.
func (k *TxSink) reports() {
	defer k.nowWG.Done()
	for ev := range k.now.Events() {
		m, ok := ev.(*kafka.Message)
		if !ok {
			if st, isStats := ev.(*kafka.Stats); isStats && k.settings.Stats != nil {
				k.settings.Stats(st.String())
			}
			continue
		}
		err := m.TopicPartition.Error
		if err != nil && m.TopicPartition.Topic != nil {
			err = k.settings.refusal(err, "Write", "topic "+*m.TopicPartition.Topic)
		}
		select {
		case k.acks <- port.Ack{Opaque: m.Opaque, Err: err}:
		case <-k.closing:
		}
	}
}

// laneIDs are the lanes' transactional.ids.
func (k *TxSink) laneIDs() [2]string { return [2]string{k.txID, k.txID + ".b"} }

func (k *TxSink) open(ctx context.Context) error {
	for i, id := range k.laneIDs() {
		l, err := k.openLane(ctx, id)
		if err != nil {
			for _, prev := range k.lanes[:i] {
				prev.close()
			}
			return err
		}
		k.lanes[i] = l
	}
	return nil
}

func (k *TxSink) openLane(ctx context.Context, txID string) (*txLane, error) {
	owned := kafka.ConfigMap{"transactional.id": txID}
	if _, set := k.settings.Properties["transaction.timeout.ms"]; !set {
		// A transaction left open by an instance that died blocks
		// read_committed readers of its partitions until it times out
		// (unless the instance restarts with the same id first).
		owned["transaction.timeout.ms"] = 20000
	}
	if _, set := k.settings.Properties["retry.backoff.ms"]; !set {
		// A lane's next transaction may still find its last one
		// completing: librdkafka retries staging offsets after
		// retry.backoff.ms (default 100 ms, and more after each try).
		owned["retry.backoff.ms"] = txRetryBackoffMs
		owned["retry.backoff.max.ms"] = txRetryBackoffMaxMs
	}
	for key, v := range routerProducerSettings(k.settings) {
		owned[key] = v
	}
	p, w, err := newProducer(k.settings, "transactional producer", owned)
	if err != nil {
		return nil, err
	}
	l := &txLane{p: p, w: w}
	// Delivery reports must be served while transactions commit; failures
	// also fail the commit, so they are only counted here.
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for ev := range p.Events() {
			switch e := ev.(type) {
			case *kafka.Message:
				if e.TopicPartition.Error != nil {
					k.failed.Add(1)
				}
			case *kafka.Stats:
				if k.settings.Stats != nil {
					k.settings.Stats(e.String())
				}
			}
		}
	}()
	ictx, stop := w.bound(ctx)
	err = p.InitTransactions(ictx)
	stop()
	if err != nil {
		l.close()
		if r := w.refusal(); r != nil {
			return nil, r
		}
		return nil, refusedOr(k.settings.refusal(err, "Write", "transactional id "+txID), "kafkaio: initialising transactions for %s: %w", txID)
	}
	return l, nil
}

func (l *txLane) close() {
	l.p.Close()
	l.wg.Wait()
	<-l.w.done
}

// Begin implements port.TxSink: the transaction goes to the other lane.
func (k *TxSink) Begin() error {
	k.cur = 1 - k.cur
	return txnError(k.lanes[k.cur].p.BeginTransaction())
}

// Produce implements port.Sink: o goes into the open transaction.
func (k *TxSink) Produce(o *port.Output, _ any) error {
	return txnError(produceTo(k.lanes[k.cur].p, o, nil))
}

// ProduceAtOnce implements port.TxSink: o goes out through the at-once
// producer, outside any transaction; its delivery is reported on Acks.
func (k *TxSink) ProduceAtOnce(o *port.Output, opaque any) error {
	if err := produceTo(k.now, o, opaque); err != nil {
		return &port.TxnError{Err: fmt.Errorf("kafkaio: sending to %s: %w", o.Topic, err), Abortable: true}
	}
	return nil
}

// produceTo hands o to p. When librdkafka's queue is full it waits for a
// little room (up to a second) rather than failing at once.
func produceTo(p *kafka.Producer, o *port.Output, opaque any) error {
	msg := &kafka.Message{
		TopicPartition: kafka.TopicPartition{Topic: &o.Topic, Partition: kafka.PartitionAny},
		Key:            o.Key,
		Value:          o.Value,
		Opaque:         opaque,
	}
	if o.Partition != nil {
		msg.TopicPartition.Partition = *o.Partition
	}
	if len(o.Headers) > 0 {
		msg.Headers = make([]kafka.Header, len(o.Headers))
		for i, h := range o.Headers {
			msg.Headers[i] = kafka.Header{Key: h.Key, Value: h.Value}
		}
	}
	for try := 0; ; try++ {
		err := p.Produce(msg, nil)
		var kerr kafka.Error
		if err == nil || !errors.As(err, &kerr) || kerr.Code() != kafka.ErrQueueFull || try == 100 {
			return err
		}
		p.Flush(10)
	}
}

// Commit implements port.TxSink: CommitTransaction flushes the open
// transaction's outputs, then ends it (EndTxn).
func (k *TxSink) Commit(ctx context.Context) error {
	return k.call(ctx, "commit_transaction", func(p *kafka.Producer) error { return p.CommitTransaction(ctx) })
}

// SendOffsets implements port.TxSink (AddOffsetsToTxn, then TxnOffsetCommit
// to the group coordinator); the transaction's outputs may still be in
// flight.
func (k *TxSink) SendOffsets(ctx context.Context, offsets map[port.TopicPartition]int64, group any) error {
	if len(offsets) == 0 {
		return nil
	}
	gm, ok := group.(*kafka.ConsumerGroupMetadata)
	if !ok {
		return &port.TxnError{Err: fmt.Errorf("kafkaio: group metadata of type %T", group), Abortable: true}
	}
	tps := make([]kafka.TopicPartition, 0, len(offsets))
	for tp, off := range offsets {
		tps = append(tps, kafka.TopicPartition{Topic: &tp.Topic, Partition: tp.Partition, Offset: kafka.Offset(off)})
	}
	return k.call(ctx, "send_offsets_to_transaction", func(p *kafka.Producer) error {
		return p.SendOffsetsToTransaction(ctx, tps, gm)
	})
}

// Abort implements port.TxSink.
func (k *TxSink) Abort(ctx context.Context) error {
	return k.call(ctx, "abort_transaction", func(p *kafka.Producer) error { return p.AbortTransaction(ctx) })
}

// Reset implements port.TxSink: both lanes are replaced (a stuck one is
// left as it is, not closed: closing waits for the call it is stuck in).
func (k *TxSink) Reset() error {
	for _, l := range k.lanes {
		if !l.stuck {
			l.close()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60e9)
	defer cancel()
	return k.open(ctx)
}

// Acks implements port.Sink: the deliveries of what ProduceAtOnce sent (a
// transaction's are settled by Commit).
func (k *TxSink) Acks() <-chan port.Ack { return k.acks }

// Close implements port.Sink: it aborts an open transaction (the router
// commits before closing), flushes what was sent at once (up to 10 s) and
// releases the producers.
func (k *TxSink) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10e9)
	defer cancel()
	var err error
	if left := k.now.Flush(10000); left > 0 {
		err = fmt.Errorf("kafkaio: %d records sent at once not delivered before close", left)
	}
	close(k.closing)
	k.now.Close()
	k.nowWG.Wait()
	<-k.nowW.done
	for _, l := range k.lanes {
		if l.stuck {
			continue
		}
		// Nothing open is the usual case: its error is expected. An abort
		// stuck past its deadline leaves the lane as it is.
		if errors.Is(bounded(ctx, stuckGrace, func() error { return l.p.AbortTransaction(ctx) }), ErrTransactionStuck) {
			continue
		}
		l.close()
	}
	return err
}

// The transactional producers' retry.backoff.ms and retry.backoff.max.ms,
// unless kafka.properties sets retry.backoff.ms.
const (
	txRetryBackoffMs    = 1
	txRetryBackoffMaxMs = 5
)

// txnError classifies librdkafka's transaction errors for the router.
func txnError(err error) error {
	if err == nil {
		return nil
	}
	var kerr kafka.Error
	if !errors.As(err, &kerr) {
		return &port.TxnError{Err: err, Abortable: true}
	}
	return &port.TxnError{Err: err, Retriable: kerr.IsRetriable(), Abortable: kerr.TxnRequiresAbort(), Fatal: kerr.IsFatal()}
}
