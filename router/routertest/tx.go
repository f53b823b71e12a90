package routertest

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// TxSink is an in-memory port.TxSink. Outputs of a transaction become
// visible (Outputs, WaitFor) only when it commits; committed offsets go to the
// Source, as a Kafka transaction commits them for the consumer group. Outputs
// sent at once (ProduceAtOnce) are visible when sent.
type TxSink struct {
	*Sink
	src *Source

	mu       sync.Mutex
	open     bool
	txn      []port.Output
	staged   map[port.TopicPartition]int64 // offsets sent to the open transaction
	sent     []map[port.TopicPartition]int64
	fail     []error
	failSend map[string]error // topic -> the error of its next Produce
	commits  int
	aborts   int
	resets   int
	produced int
	atOnce   int   // outputs sent outside transactions (ProduceAtOnce)
	batches  []int // outputs of each committed transaction, in order
	// registered: offsets staged by Register, one map per call, and how
	// many outputs the open transaction held at each call.
	registered   []map[port.TopicPartition]int64
	registeredAt []int

	gate        chan struct{} // non-nil: Commit waits for it to close (BlockCommits)
	waiting     chan struct{} // closed when a Commit waits at the gate
	inCommit    int           // Commit calls running now
	maxInCommit int           // the most that ever ran at once
}

var (
	_ port.TxSink      = (*TxSink)(nil)
	_ port.TxRegistrar = (*TxSink)(nil)
)

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

// Begin implements port.TxSink.
func (k *TxSink) Begin() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.open = true
	return nil
}

// Produce implements port.Sink: the output waits in the transaction.
func (k *TxSink) Produce(o *port.Output, _ any) error {
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

// ProduceAtOnce implements port.TxSink: the output is visible at once, as
// the Sink's outputs are, whether a transaction is open or not, and its
// acknowledgement comes on Acks (held by Hold, failed by FailTopic). A
// FailProduce for its topic fails the call, once.
func (k *TxSink) ProduceAtOnce(o *port.Output, opaque any) error {
	k.mu.Lock()
	if err := k.failSend[o.Topic]; err != nil {
		delete(k.failSend, o.Topic)
		k.mu.Unlock()
		return err
	}
	k.atOnce++
	k.mu.Unlock()
	return k.Sink.Produce(o, opaque)
}

// AtOnce returns how many outputs were sent outside transactions.
func (k *TxSink) AtOnce() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.atOnce
}

// Register implements port.TxRegistrar: it notes the offsets staged and
// how many outputs the transaction held then.
func (k *TxSink) Register(_ context.Context, offsets map[port.TopicPartition]int64, _ any) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.registered = append(k.registered, maps.Clone(offsets))
	k.registeredAt = append(k.registeredAt, len(k.txn))
	return nil
}

// Registered returns the offsets each Register call staged and how many
// outputs the transaction held at each call.
func (k *TxSink) Registered() ([]map[port.TopicPartition]int64, []int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.registered), slices.Clone(k.registeredAt)
}

// BlockCommits makes the next Commit calls wait until UnblockCommits, as a
// slow broker would; the returned channel closes once a Commit waits.
func (k *TxSink) BlockCommits() <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gate, k.waiting = make(chan struct{}), make(chan struct{})
	return k.waiting
}

// UnblockCommits lets the waiting and later Commit calls through.
func (k *TxSink) UnblockCommits() {
	k.mu.Lock()
	gate := k.gate
	k.gate = nil
	k.mu.Unlock()
	if gate != nil {
		close(gate)
	}
}

// Batches returns how many outputs each committed transaction held, in
// commit order.
func (k *TxSink) Batches() []int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]int(nil), k.batches...)
}

// MaxConcurrentCommits returns the most Commit calls that ever ran at once.
func (k *TxSink) MaxConcurrentCommits() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.maxInCommit
}

// SendOffsets implements port.TxSink: the offsets wait in the open
// transaction and reach the Source when it commits.
func (k *TxSink) SendOffsets(_ context.Context, offsets map[port.TopicPartition]int64, _ any) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.staged == nil {
		k.staged = map[port.TopicPartition]int64{}
	}
	maps.Copy(k.staged, offsets)
	k.sent = append(k.sent, maps.Clone(offsets))
	return nil
}

// OffsetsSent returns the offsets of each SendOffsets call so far, in
// order, committed or not.
func (k *TxSink) OffsetsSent() []map[port.TopicPartition]int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.sent)
}

// Commit implements port.TxSink: the open transaction's outputs become
// visible and the offsets sent to it are stored in the Source.
func (k *TxSink) Commit(context.Context) error {
	k.mu.Lock()
	k.inCommit++
	k.maxInCommit = max(k.maxInCommit, k.inCommit)
	if gate := k.gate; gate != nil {
		select {
		case <-k.waiting:
		default:
			close(k.waiting)
		}
		k.mu.Unlock()
		<-gate
		k.mu.Lock()
	}
	k.inCommit--
	if len(k.fail) > 0 {
		err := k.fail[0]
		k.fail = k.fail[1:]
		k.mu.Unlock()
		return err
	}
	txn, offsets := k.txn, k.staged
	k.txn, k.staged, k.open = nil, nil, false
	k.commits++
	k.batches = append(k.batches, len(txn))
	k.mu.Unlock()
	for i := range txn {
		_ = k.Sink.Produce(&txn[i], nil)
	}
	for tp, off := range offsets {
		_ = k.src.StoreOffset(tp, off)
	}
	return nil
}

// Abort implements port.TxSink.
func (k *TxSink) Abort(context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.txn, k.staged, k.open = nil, nil, false
	k.aborts++
	return nil
}

// Reset implements port.TxSink.
func (k *TxSink) Reset() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.txn, k.staged, k.open = nil, nil, false
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

var _ port.Restorer = (*Restorer)(nil)

// Restore implements port.Restorer. An output's partition is the one it
// was written to, or, without one, the murmur2 hash of its key.
func (r *Restorer) Restore(_ context.Context, partitions []int32) (map[int32][]port.PendingRecord, error) {
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
	out := map[int32][]port.PendingRecord{}
	for _, at := range order {
		if pi, ok := live[at]; ok {
			out[at.part] = append(out[at.part], port.PendingRecord{Key: at.key, Intent: pi})
			delete(live, at)
		}
	}
	return out, nil
}
