package lag

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf16"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
)

// Ends is a partition's two ends: Stable, the last stable offset (where a
// read_committed reader stops: the first offset of the oldest transaction
// still open), and High, the high watermark (where a read_uncommitted
// reader stops). Stable < High while a transaction is open on it.
type Ends struct {
	Stable, High int64
}

// EndsAdmin is what the HangWatch asks the cluster. Ends returns every
// partition of every topic asked for that exists, by topic and partition;
// it honours ctx and bounds its own wait.
type EndsAdmin interface {
	Ends(ctx context.Context, topics []string) (map[string]map[int32]Ends, error)
}

// Hanging is a partition whose last stable offset has stayed at the same
// offset, behind its high watermark, for longer than the HangWatch's
// limit: a transaction that should have ended (committed, aborted, or
// aborted by the broker at its timeout) is still open there, and
// read_committed readers of the partition (the router, takeovers' offset
// reads, the API's results reader) stall at Stable for good.
type Hanging struct {
	Topic     string
	Partition int32
	Ends
	// Since is when the watch first saw the last stable offset at Stable.
	Since time.Time
}

// AbortCommand is the command that ends the transaction with Kafka's own
// tool (KIP-664): it finds the producer whose transaction begins at Stable
// and writes the abort marker.
func (h Hanging) AbortCommand(bootstrap string) string {
	if bootstrap == "" {
		bootstrap = "BOOTSTRAP"
	}
	return fmt.Sprintf("deploy/kafka/kafka.sh tool org.apache.kafka.tools.TransactionsCommand --bootstrap-server %s abort --topic %s --partition %d --start-offset %d",
		bootstrap, h.Topic, h.Partition, h.Stable)
}

// DefaultHangAfter is how long a last stable offset may stay behind the
// high watermark without moving before the HangWatch reports it: twice the
// router's transaction timeout (20 s). The broker aborts a transaction
// open longer than its timeout within transaction.abort.timed.out.
// transaction.cleanup.interval.ms (10 s) of it, so only a transaction the
// broker has lost stays open that long.
const DefaultHangAfter = 40 * time.Second

// HangWatch samples the ends of a set of topics' partitions on an interval
// and reports a partition whose last stable offset is stuck behind its high
// watermark (a hanging transaction): one log line naming the partition and
// the command that aborts the transaction, a counter, and Err's error
// until the offset moves again. Given a TxnAborter (WithHangAborter) it
// then ends the transaction itself when nothing says it may be a live one
// (abort.go); without one it only watches. Create it with NewHangWatch,
// run it with Run, stop it with Shutdown; Hanging and Err are safe for
// concurrent use.
type HangWatch struct {
	admin     EndsAdmin
	topics    []string
	clock     clockwork.Clock
	interval  time.Duration
	after     time.Duration
	silent    time.Duration // how long a producer must not have written before its transaction is ended
	bootstrap string
	log       *slog.Logger
	found     prometheus.Counter
	aborter   TxnAborter // nil: watch only
	aborted   prometheus.Counter
	committed prometheus.Counter
	group     string // watch its partition of OffsetsTopic too ("": not)

	offsetsFailing bool // the last sample of OffsetsTopic failed (Run's goroutine only)

	seen    map[partitionKey]*stuckAt // Run's goroutine only
	failing bool                      // the last sample failed (Run's goroutine only)

	mu      sync.RWMutex
	hanging []Hanging // replaced whole, never modified

	started  atomic.Bool
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

type partitionKey struct {
	topic string
	p     int32
}

// stuckAt is where a partition's last stable offset was first seen behind
// its high watermark, and since when.
type stuckAt struct {
	stable   int64
	since    time.Time
	reported bool
	// abortLogged: a line said why the watch did not abort it; refused:
	// the cluster refused the abort, so the watch no longer tries.
	abortLogged, refused bool
}

// HangOption configures a HangWatch.
type HangOption func(*hangOptions)

type hangOptions struct {
	clock     clockwork.Clock
	interval  time.Duration
	after     time.Duration
	silent    time.Duration
	bootstrap string
	reg       prometheus.Registerer
	log       *slog.Logger
	aborter   TxnAborter
	group     string
}

// WithHangClock sets the clock the interval and the limit run on (default:
// real).
func WithHangClock(c clockwork.Clock) HangOption { return func(o *hangOptions) { o.clock = c } }

// WithHangInterval sets how long the watch waits after a sample before the
// next (default DefaultInterval).
func WithHangInterval(d time.Duration) HangOption { return func(o *hangOptions) { o.interval = d } }

// WithHangAfter sets how long a last stable offset may stay stuck behind
// the high watermark before it is reported (default DefaultHangAfter).
func WithHangAfter(d time.Duration) HangOption { return func(o *hangOptions) { o.after = d } }

// WithHangAbortAfter sets how long the producer of a transaction stuck at
// a partition's last stable offset must have written nothing there before
// the watch ends it (default half DefaultHangAfter: the transaction
// timeout). The watch tries as soon as it has seen the offset stuck at two
// samples, without waiting for the report's limit: the producer's last
// write is the broker's fact, which a router started since (a takeover,
// a replaced client) knows as well as one that watched all along.
func WithHangAbortAfter(d time.Duration) HangOption { return func(o *hangOptions) { o.silent = d } }

// WithHangBootstrap sets the bootstrap servers the abort command names.
func WithHangBootstrap(b string) HangOption { return func(o *hangOptions) { o.bootstrap = b } }

// WithHangRegisterer sets where the watch registers its metrics (default:
// a registry of its own, i.e. nowhere visible).
func WithHangRegisterer(r prometheus.Registerer) HangOption {
	return func(o *hangOptions) { o.reg = r }
}

// WithHangAborter makes the watch end the hanging transactions it finds
// itself, with a (default: it only reports them).
func WithHangAborter(a TxnAborter) HangOption { return func(o *hangOptions) { o.aborter = a } }

// WithHangGroupOffsets makes the watch watch group's partition of
// OffsetsTopic too: a transaction that committed the group's offsets
// (TxnOffsetCommit) and was forgotten holds them there, and a reader of
// the group's committed offsets that requires them stable (a takeover)
// waits for good. It is read in a request of its own: a failure to read it
// (its ACL) is said once and leaves the other topics watched.
func WithHangGroupOffsets(group string) HangOption { return func(o *hangOptions) { o.group = group } }

// WithHangLogger sets the logger (default slog.Default()).
func WithHangLogger(l *slog.Logger) HangOption { return func(o *hangOptions) { o.log = l } }

// NewHangWatch returns a watch of topics' partitions that asks admin. It
// registers its metrics; it starts nothing.
func NewHangWatch(admin EndsAdmin, topics []string, opts ...HangOption) (*HangWatch, error) {
	o := hangOptions{clock: clockwork.NewRealClock(), interval: DefaultInterval, after: DefaultHangAfter, reg: prometheus.NewRegistry(), log: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	if o.silent == 0 {
		o.silent = DefaultHangAfter / 2
	}
	if admin == nil || o.clock == nil || o.reg == nil || o.log == nil {
		return nil, ErrMissingDependency
	}
	if o.interval <= 0 || o.after <= 0 || o.silent < 0 {
		return nil, fmt.Errorf("%w: interval %s, limit %s, end after %s", ErrBadInterval, o.interval, o.after, o.silent)
	}
	w := &HangWatch{
		admin: admin, clock: o.clock, interval: o.interval, after: o.after, silent: o.silent, bootstrap: o.bootstrap, log: o.log,
		aborter: o.aborter, group: o.group, seen: map[partitionKey]*stuckAt{},
		found: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_hanging_transactions_total",
			Help: "Partitions found with a hanging transaction: the last stable offset stuck behind the high watermark for longer than twice the transaction timeout (read_committed readers stall there; see the log line for the abort command).",
		}),
		aborted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_hanging_transactions_aborted_total",
			Help: "Hanging transactions this instance aborted itself (router.abort_hanging_transactions): an abort marker written for a producer whose coordinator had aborted the transaction, or never had the partition in it, without the marker here; see the log line for the partition, producer and offset.",
		}),
		committed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_hanging_transactions_committed_total",
			Help: "Hanging transactions this instance committed itself (router.abort_hanging_transactions): a commit marker written for a producer whose coordinator had committed the transaction without writing the marker here (a partition without a leader at that moment, KAFKA-20734); see the log line for the partition, producer and offset.",
		}),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	for _, t := range topics {
		if t != "" && !slices.Contains(w.topics, t) {
			w.topics = append(w.topics, t)
		}
	}
	slices.Sort(w.topics)
	if err := o.reg.Register(w.found); err != nil {
		return nil, fmt.Errorf("lag: registering metrics: %w", err)
	}
	if err := o.reg.Register(w.committed); err != nil {
		return nil, fmt.Errorf("lag: registering metrics: %w", err)
	}
	if err := o.reg.Register(w.aborted); err != nil {
		return nil, fmt.Errorf("lag: registering metrics: %w", err)
	}
	if err := o.reg.Register(&hangCollector{w: w}); err != nil {
		return nil, fmt.Errorf("lag: registering metrics: %w", err)
	}
	return w, nil
}

// Hanging returns the partitions found hanging at the last sample, by topic
// and partition.
func (w *HangWatch) Hanging() []Hanging {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return slices.Clone(w.hanging)
}

// Err returns nil unless a partition is hanging at the last sample; then
// an error wrapping ErrHangingTransaction that names the first such
// partition and the command that aborts its transaction.
func (w *HangWatch) Err() error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if len(w.hanging) == 0 {
		return nil
	}
	h := w.hanging[0]
	more := ""
	if len(w.hanging) > 1 {
		more = fmt.Sprintf(" (and %d more partitions)", len(w.hanging)-1)
	}
	return fmt.Errorf("%w: %s[%d] held at offset %d (high watermark %d) since %s%s; abort it with: %s", ErrHangingTransaction,
		h.Topic, h.Partition, h.Stable, h.High, h.Since.UTC().Format(time.RFC3339), more, h.AbortCommand(w.bootstrap))
}

// Run samples at once, then again interval after each sample ends, until
// ctx ends or Shutdown is called; it returns nil then. A failed sample is
// logged (once until a sample succeeds) and changes nothing. Run may be
// called once.
func (w *HangWatch) Run(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return ErrAlreadyStarted
	}
	defer close(w.done)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-w.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		w.sample(ctx)
		t := w.clock.NewTimer(w.interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.Chan():
		}
	}
}

// Shutdown stops Run and waits for it to return or ctx to end. It is safe to
// call more than once, and without Run.
func (w *HangWatch) Shutdown(ctx context.Context) error {
	w.stopOnce.Do(func() { close(w.stop) })
	if !w.started.Load() {
		return nil
	}
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sample asks for the ends once and publishes what hangs.
func (w *HangWatch) sample(ctx context.Context) {
	if len(w.topics) == 0 {
		return
	}
	ends, err := w.admin.Ends(ctx, w.topics)
	if ctx.Err() != nil {
		return
	}
	if err != nil { // once per run of failures: a broker restart fails several samples in a row
		if !w.failing {
			w.log.Warn("lag: the hanging-transaction watch could not read the partitions' ends (said once until it can)", "err", err)
		}
		w.failing = true
		return
	}
	if w.failing {
		w.log.Info("lag: the hanging-transaction watch reads the partitions' ends again")
		w.failing = false
	}
	if w.group != "" {
		w.addGroupOffsets(ctx, ends)
	}
	now := w.clock.Now()
	stuck := w.observe(ends, now)
	if w.aborter == nil {
		return
	}
	for _, s := range stuck {
		w.tryEnd(ctx, s.h, s.st, now)
	}
}

// addGroupOffsets adds the ends of the group's partition of OffsetsTopic
// to ends.
func (w *HangWatch) addGroupOffsets(ctx context.Context, ends map[string]map[int32]Ends) {
	oe, err := w.admin.Ends(ctx, []string{OffsetsTopic})
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		if !w.offsetsFailing {
			w.log.Warn("lag: the hanging-transaction watch could not read "+OffsetsTopic+"'s ends, so it does not watch the group's committed offsets (said once until it can; under ACLs it needs Describe on that topic)",
				"group", w.group, "err", err)
		}
		w.offsetsFailing = true
		return
	}
	w.offsetsFailing = false
	parts := oe[OffsetsTopic]
	if len(parts) == 0 {
		return
	}
	p := OffsetsPartition(w.group, len(parts))
	if e, ok := parts[p]; ok {
		ends[OffsetsTopic] = map[int32]Ends{p: e}
	}
}

// OffsetsTopic is the topic where Kafka keeps consumer groups' committed
// offsets.
const OffsetsTopic = "__consumer_offsets"

// OffsetsPartition is the partition of OffsetsTopic, of n, that holds
// group's offsets: the broker's Utils.abs(group.hashCode()) % n, with
// Java's String hash over the UTF-16 code units, and Kafka's abs
// (Math.abs, but 0 for the smallest int).
func OffsetsPartition(group string, n int) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(group)) {
		h = 31*h + int32(u)
	}
	abs := int64(h)
	if abs < 0 {
		abs = -abs
	}
	if h == math.MinInt32 {
		abs = 0
	}
	return int32(abs % int64(n))
}

// stuckPartition is a partition whose last stable offset was behind its
// high watermark at the same offset at an earlier sample too.
type stuckPartition struct {
	h  Hanging
	st *stuckAt
}

// observe updates what it knows of each partition from one sample taken at
// now, publishes the partitions hanging, and returns the partitions seen
// stuck at the same offset at an earlier sample (the hanging ones among
// them), which the aborter looks at.
func (w *HangWatch) observe(ends map[string]map[int32]Ends, now time.Time) []stuckPartition {
	var hanging []Hanging
	var stuck []stuckPartition
	seen := make(map[partitionKey]*stuckAt, len(w.seen))
	for topic, parts := range ends {
		for p, e := range parts {
			if e.Stable >= e.High {
				continue // nothing open: forget it
			}
			k := partitionKey{topic, p}
			st := w.seen[k]
			if st == nil || st.stable != e.Stable {
				st = &stuckAt{stable: e.Stable, since: now} // a new transaction, or it moved
			}
			seen[k] = st
			h := Hanging{Topic: topic, Partition: p, Ends: e, Since: st.since}
			if now.After(st.since) {
				stuck = append(stuck, stuckPartition{h, st})
			}
			if now.Sub(st.since) < w.after {
				continue
			}
			hanging = append(hanging, h)
			if !st.reported {
				st.reported = true
				w.found.Inc()
				w.log.Error(fmt.Sprintf("lag: hanging transaction on %s[%d]: its last stable offset has stayed at %d (high watermark %d) for %s, so read_committed readers stall there; abort it with: %s",
					topic, p, e.Stable, e.High, now.Sub(st.since).Round(time.Second), h.AbortCommand(w.bootstrap)))
			}
		}
	}
	for k, st := range w.seen {
		if _, still := seen[k]; !still && st.reported {
			w.log.Info(fmt.Sprintf("lag: the hanging transaction on %s[%d] has ended", k.topic, k.p))
		}
	}
	w.seen = seen
	slices.SortFunc(hanging, func(a, b Hanging) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	w.mu.Lock()
	w.hanging = hanging
	w.mu.Unlock()
	slices.SortFunc(stuck, func(a, b stuckPartition) int {
		return cmp.Or(cmp.Compare(a.h.Topic, b.h.Topic), cmp.Compare(a.h.Partition, b.h.Partition))
	})
	return stuck
}

var hangingDesc = prometheus.NewDesc("switchboard_hanging_transaction_partitions",
	"Partitions whose last stable offset is stuck behind the high watermark (a hanging transaction) at the last sample.",
	nil, nil)

// hangCollector exports how many partitions hang now.
type hangCollector struct{ w *HangWatch }

func (c *hangCollector) Describe(ch chan<- *prometheus.Desc) { ch <- hangingDesc }

func (c *hangCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(hangingDesc, prometheus.GaugeValue, float64(len(c.w.Hanging())))
}
