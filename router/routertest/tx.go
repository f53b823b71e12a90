package routertest

import (
	"context"
	"sync"

	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// TxSink is an in-memory router.TxSink. Outputs of a transaction become
// visible (Outputs, WaitFor) only when it commits; committed offsets go to the
// Source, as a Kafka transaction commits them for the consumer group.
type TxSink struct {
	*Sink
	src *Source

	mu       sync.Mutex
	open     bool
	txn      []router.Output
	fail     []error
	failSend map[string]error // topic -> the error of its next Produce
	commits  int
	aborts   int
	resets   int
	produced int
}

var _ router.TxSink = (*TxSink)(nil)

// NewTxSink returns a TxSink whose commits store offsets in src.
func NewTxSink(src *Source) *TxSink { return &TxSink{Sink: NewSink(), src: src} }

// FailCommits makes the next commits fail with these errors, in order.
func (k *TxSink) FailCommits(errs ...error) {
	k.mu.Lock()
	k.fail = append(k.fail, errs...)
	k.mu.Unlock()
}

// FailProduce makes the next Produce to topic fail with err, once.
func (k *TxSink) FailProduce(topic string, err error) {
	k.mu.Lock()
	if k.failSend == nil {
		k.failSend = map[string]error{}
	}
	k.failSend[topic] = err
	k.mu.Unlock()
}

// Begin implements router.TxSink.
func (k *TxSink) Begin() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.open = true
	return nil
}

// Produce implements router.Sink: the output waits in the transaction.
func (k *TxSink) Produce(o *router.Output, _ any) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.failSend[o.Topic]; err != nil {
		delete(k.failSend, o.Topic)
		return err
	}
	k.txn = append(k.txn, *o)
	k.produced++
	return nil
}

// Commit implements router.TxSink.
func (k *TxSink) Commit(_ context.Context, offsets map[router.TopicPartition]int64, _ any) error {
	k.mu.Lock()
	if len(k.fail) > 0 {
		err := k.fail[0]
		k.fail = k.fail[1:]
		k.mu.Unlock()
		return err
	}
	txn := k.txn
	k.txn, k.open = nil, false
	k.commits++
	k.mu.Unlock()
	for i := range txn {
		_ = k.Sink.Produce(&txn[i], nil)
	}
	for tp, off := range offsets {
		_ = k.src.StoreOffset(tp, off)
	}
	return nil
}

// Abort implements router.TxSink.
func (k *TxSink) Abort(context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.txn, k.open = nil, false
	k.aborts++
	return nil
}

// Reset implements router.TxSink.
func (k *TxSink) Reset() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.txn, k.open = nil, false
	k.resets++
	return nil
}

// Counts returns the commits, aborts and resets so far.
func (k *TxSink) Counts() (commits, aborts, resets int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.commits, k.aborts, k.resets
}

// Restorer restores pending intents from what a Sink committed to the
// pending topic, as the Kafka changelog would hold them.
type Restorer struct {
	Sink       *Sink
	Codec      *schemas.Codec
	Topic      string
	Partitions int32
}

var _ router.Restorer = (*Restorer)(nil)

// Restore implements router.Restorer. An output's partition is the one it
// was written to, or, without one, the murmur2 hash of its key.
func (r *Restorer) Restore(_ context.Context, partitions []int32) (map[int32][]router.PendingRecord, error) {
	want := map[int32]bool{}
	for _, p := range partitions {
		want[p] = true
	}
	type slot struct {
		part int32
		key  string
	}
	live := map[slot]*schemas.PendingIntent{}
	var order []slot
	for _, o := range r.Sink.Outputs(r.Topic) {
		at := slot{router.PartitionFor(o.Key, r.Partitions), string(o.Key)}
		if o.Partition != nil {
			at.part = *o.Partition
		}
		if !want[at.part] {
			continue
		}
		if o.Value == nil {
			delete(live, at)
			continue
		}
		var pi schemas.PendingIntent
		if err := r.Codec.Decode(o.Value, &pi); err != nil {
			return nil, err
		}
		if _, seen := live[at]; !seen {
			order = append(order, at)
		}
		live[at] = &pi
	}
	out := map[int32][]router.PendingRecord{}
	for _, at := range order {
		if pi, ok := live[at]; ok {
			out[at.part] = append(out[at.part], router.PendingRecord{Key: at.key, Intent: pi})
			delete(live, at)
		}
	}
	return out, nil
}
