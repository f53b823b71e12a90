package lookup

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/switchboard-mcp/switchboard/api"
)

// DefaultCacheBytes is the block cache [Open] gives the store unless told
// otherwise: what the store keeps in memory, however many results it holds.
const DefaultCacheBytes = 16 << 20

// maxOpenTables bounds the tables the store keeps open.
const maxOpenTables = 256

// Store is the materialised view of every intent's result, timeout event
// and pending state, persisted in a directory (a pebble database). It
// implements [api.IntentLookup]. A [Materializer] writes it; lookups may run
// at any time, concurrently with writes. Its memory is bounded by the block
// cache and the memtables, not by how many results it holds: pebble reads
// its files with pread into the cache, it does not map them.
type Store struct {
	db   *pebble.DB
	lock *pebble.Lock
	dir  string
	log  *slog.Logger

	// ready is set by the Materializer once the store has read the topics
	// up to where they ended at its start: until then a miss is
	// api.ErrLookupCatchingUp.
	ready atomic.Bool

	// mu orders Expire's read-then-delete with batch commits, so that an
	// expiry never deletes a value written after it read it.
	mu sync.Mutex
}

var _ api.IntentLookup = (*Store)(nil)

// Option sets an optional parameter of [Open].
type Option func(*options)

type options struct {
	cacheBytes int64
	log        *slog.Logger
}

// WithCacheBytes sets the size of the block cache (default
// DefaultCacheBytes).
func WithCacheBytes(n int64) Option { return func(o *options) { o.cacheBytes = n } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// Open opens the store in dir, creating the directory and an empty store
// if there is none. A store that cannot be read (corrupt, or of another
// format) is deleted and created empty, to be rebuilt from Kafka: the store
// only ever holds what the topics hold. A directory in use by another
// process is an error.
func Open(dir string, opts ...Option) (*Store, error) {
	o := options{cacheBytes: DefaultCacheBytes, log: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	if dir == "" {
		return nil, fmt.Errorf("%w: no directory", ErrOpen)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOpen, err)
	}
	// Hold the directory's lock first: then any failure to open is the
	// store's content, which is rebuilt, never another process's store.
	lock, err := pebble.LockDirectory(dir, vfs.Default)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is in use by another process (each instance needs its own http.lookup.dir): %w", ErrOpen, dir, err)
	}
	s := &Store{dir: dir, log: o.log, lock: lock}
	db, err := pebble.Open(dir, pebbleOptions(o, lock))
	if err != nil {
		o.log.Warn("the lookup store cannot be read: deleting it, to rebuild it from Kafka", "dir", dir, "error", err)
		if rerr := removeContents(dir); rerr != nil {
			_ = lock.Close()
			return nil, fmt.Errorf("%w: %s: %w", ErrOpen, dir, rerr)
		}
		db, err = pebble.Open(dir, pebbleOptions(o, lock))
	}
	if err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrOpen, dir, err)
	}
	s.db = db
	v, err := s.get(metaFormat)
	switch {
	case err != nil:
		_ = s.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrOpen, dir, err)
	case v == nil:
		err = s.Reset("new store")
	case string(v) != formatVersion:
		err = s.Reset(fmt.Sprintf("format %q, not %q", v, formatVersion))
	}
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

func pebbleOptions(o options, lock *pebble.Lock) *pebble.Options {
	po := &pebble.Options{CacheSize: o.cacheBytes, Logger: quietLogger{o.log}, Lock: lock, FS: vfs.Default}
	// Memory that does not grow with the store: the block cache, the
	// memtables, and at most maxOpenTables open tables (their readers'
	// metadata), which larger files keep few.
	po.MaxOpenFiles = maxOpenTables
	po.TargetFileSizes[0] = 8 << 20 // then ×2 per level
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10) // a miss reads no data block
	}
	// The fastest (pure Go) compression: zstd on the lower levels saved
	// disk but its cgo decoders' memory made the RSS grow with the store
	// (BENCHMARKS.md, issue 17).
	po.ApplyCompressionSettings(func() pebble.DBCompressionSettings { return pebble.DBCompressionFastest })
	return po
}

func removeContents(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == "LOCK" { // ours: held
			continue
		}
		if err := os.RemoveAll(dir + string(os.PathSeparator) + e.Name()); err != nil {
			return err
		}
	}
	return nil
}

// quietLogger passes pebble's messages to slog at debug level (errors at
// warn): pebble logs every flush and compaction.
type quietLogger struct{ log *slog.Logger }

func (l quietLogger) Infof(format string, args ...any) { l.log.Debug(fmt.Sprintf(format, args...)) }
func (l quietLogger) Errorf(format string, args ...any) {
	l.log.Warn("lookup store: " + fmt.Sprintf(format, args...))
}

func (l quietLogger) Fatalf(format string, args ...any) {
	l.log.Error("lookup store: " + fmt.Sprintf(format, args...))
	os.Exit(1) // pebble's contract: Fatalf does not return
}

// Close closes the store and releases its directory. Lookups after it fail.
func (s *Store) Close() error {
	err := s.db.Close()
	return errors.Join(err, s.lock.Close())
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// Ready reports whether the store has caught up with the topics (see
// [Materializer]).
func (s *Store) Ready() bool { return s.ready.Load() }

// Reset deletes everything the store holds, to rebuild it from the topics'
// beginnings; reason is logged. Lookups meanwhile see either the old store
// or an empty one.
func (s *Store) Reset(reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.db.NewBatch()
	defer func() { _ = b.Close() }()
	if err := b.DeleteRange([]byte{0}, []byte{0xff}, nil); err != nil {
		return fmt.Errorf("%w: %w", ErrWrite, err)
	}
	if err := b.Set(metaFormat, []byte(formatVersion), nil); err != nil {
		return fmt.Errorf("%w: %w", ErrWrite, err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("%w: %w", ErrWrite, err)
	}
	if reason != "new store" {
		s.log.Warn("lookup store emptied, to rebuild it from Kafka", "dir", s.dir, "reason", reason)
		if err := s.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true); err != nil {
			s.log.Warn("lookup store: compacting after the reset", "error", err)
		}
	}
	return nil
}

// get returns a copy of key's value, nil if there is none.
func (s *Store) get(key []byte) ([]byte, error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRead, err)
	}
	out := bytes.Clone(v)
	if out == nil {
		out = []byte{}
	}
	_ = closer.Close()
	return out, nil
}

// TopicMeta is what the store remembers of a topic it was materialised
// from, to notice that the topic was recreated.
type TopicMeta struct {
	Name string
	ID   string // Kafka's topic id; "" when unknown
}

// Topic returns what the store remembers of the topic of kind k (ok false:
// nothing).
func (s *Store) Topic(k Kind) (TopicMeta, bool, error) {
	v, err := s.get(topicKey(k))
	if err != nil || v == nil {
		return TopicMeta{}, false, err
	}
	name, id, _ := bytes.Cut(v, []byte{0})
	return TopicMeta{Name: string(name), ID: string(id)}, true, nil
}

// Positions returns, per partition, the offset the store has read the topic
// of kind k up to (exclusive); -1 for a partition it has not read.
func (s *Store) Positions(k Kind) ([]int64, error) {
	lo := posKey(k, 0)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo[:len(lo)-4])})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRead, err)
	}
	defer func() { _ = it.Close() }()
	var out []int64
	for it.First(); it.Valid(); it.Next() {
		k, v := it.Key(), it.Value()
		if len(k) != len(lo) || len(v) != 8 {
			continue
		}
		p := int(binary.BigEndian.Uint32(k[len(k)-4:]))
		for len(out) <= p {
			out = append(out, -1)
		}
		out[p] = int64(binary.BigEndian.Uint64(v))
	}
	return out, it.Error()
}

// Lookup implements [api.IntentLookup].
func (s *Store) Lookup(ctx context.Context, tenant, id string) (api.IntentStatus, error) {
	if err := ctx.Err(); err != nil {
		return api.IntentStatus{}, err
	}
	if tenant == api.AnyTenant {
		t, ok, err := s.anyTenant(id)
		if err != nil {
			return api.IntentStatus{}, err
		}
		if !ok {
			return api.IntentStatus{}, s.miss()
		}
		tenant = t
	}
	st := api.IntentStatus{IntentID: id, Tenant: tenant}
	found := false
	if v, err := s.get(intentKey(pfxResult, tenant, id)); err != nil {
		return st, err
	} else if v != nil {
		if err := unmarshalAt(v, &st.Result); err != nil {
			return st, err
		}
		found = true
	}
	if v, err := s.get(intentKey(pfxTimeout, tenant, id)); err != nil {
		return st, err
	} else if v != nil {
		if err := unmarshalAt(v, &st.Timeout); err != nil {
			return st, err
		}
		found = true
	}
	if st.Result == nil {
		if v, err := s.get(intentKey(pfxPending, tenant, id)); err != nil {
			return st, err
		} else if v != nil {
			if err := json.Unmarshal(v, &st.Pending); err != nil {
				return st, fmt.Errorf("%w: %w", ErrRead, err)
			}
			found = true
		}
		if st.Pending == nil && st.Timeout != nil { // timed out; the result is on its way
			t := st.Timeout
			st.Pending = &api.PendingState{State: api.PendingResolving, IntentType: t.IntentType, Agent: t.Agent, Deadline: t.Deadline}
		}
	}
	if !found {
		return api.IntentStatus{}, s.miss()
	}
	return st, nil
}

// miss is the error of a lookup that found nothing.
func (s *Store) miss() error {
	if !s.ready.Load() {
		return api.ErrLookupCatchingUp
	}
	return api.ErrIntentNotFound
}

// anyTenant returns the tenant of some intent id: "" (no tenant) first,
// else the first tenant with a result, a pending state or a timeout event.
func (s *Store) anyTenant(id string) (string, bool, error) {
	for _, pfx := range []byte{pfxResult, pfxPending, pfxTimeout} {
		if v, err := s.get(intentKey(pfx, "", id)); err != nil || v != nil {
			return "", v != nil, err
		}
	}
	for _, pfx := range []byte{pfxResult, pfxPending, pfxTimeout} {
		p := idPrefix(pfx, id)
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err != nil {
			return "", false, fmt.Errorf("%w: %w", ErrRead, err)
		}
		ok := it.First()
		var tenant string
		if ok {
			tenant, _, _ = splitIntent(it.Key())
		}
		err = it.Close()
		if ok || err != nil {
			return tenant, ok, err
		}
	}
	return "", false, nil
}

// unmarshalAt decodes a value written by putAt: partition, offset, JSON.
func unmarshalAt[T any](v []byte, dst **T) error {
	if len(v) < 12 {
		return fmt.Errorf("%w: a value of %d bytes", ErrRead, len(v))
	}
	var t T
	if err := json.Unmarshal(v[12:], &t); err != nil {
		return fmt.Errorf("%w: %w", ErrRead, err)
	}
	*dst = &t
	return nil
}

// at returns the partition and offset a value written by putAt came from.
func at(v []byte) (int32, int64, bool) {
	if len(v) < 12 {
		return 0, 0, false
	}
	return int32(binary.BigEndian.Uint32(v)), int64(binary.BigEndian.Uint64(v[4:])), true
}

// DiskBytes returns the size of the store's files.
func (s *Store) DiskBytes() uint64 {
	m := s.db.Metrics()
	return m.DiskSpaceUsage()
}

// MemoryUse describes what the store holds in memory: its block cache,
// memtables and open tables (for benchmarks and logs).
func (s *Store) MemoryUse() string {
	m := s.db.Metrics()
	return fmt.Sprintf("block cache %d MB of %d entries, memtables %d MB, table cache %d tables, %d sstables",
		m.BlockCache.Size>>20, m.BlockCache.Count, m.MemTable.Size>>20, m.FileCache.TableCount, m.Total().TablesCount)
}

// Flush writes the memtable to disk (tests and benchmarks, before a restart
// measured without the write-ahead log's replay).
func (s *Store) Flush() error { return s.db.Flush() }

var _ io.Closer = (*Store)(nil)
