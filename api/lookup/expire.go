package lookup

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// expireChunk is how many records Expire deletes per commit.
const expireChunk = 4096

// Expire deletes what the store holds from records of the topic of kind k
// (results or timeouts) that the topic no longer keeps: those below lows[p]
// on partition p (the partition's first offset, as retention moved it). A
// result goes with its timeout event, pending state and entry in its
// tenant's list; a value written since by a later record of the same intent
// (a redelivered result) stays. It returns how many records it expired, and
// is safe to call concurrently with lookups and batch commits.
func (s *Store) Expire(k Kind, lows []int64) (int, error) {
	total := 0
	for p, low := range lows {
		if low <= 0 {
			continue
		}
		for {
			n, more, err := s.expireChunk(k, int32(p), low)
			total += n
			if err != nil {
				return total, err
			}
			if !more {
				break
			}
		}
	}
	return total, nil
}

// expireChunk expires up to expireChunk records of partition below low,
// under mu, and says whether more may remain.
func (s *Store) expireChunk(k Kind, partition int32, low int64) (int, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lo, hi := offsetKey(k, partition, 0), offsetKey(k, partition, low)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, false, fmt.Errorf("%w: %w", ErrRead, err)
	}
	b := s.db.NewBatch()
	defer func() { _ = b.Close() }()
	n := 0
	var last []byte
	for it.First(); it.Valid() && n < expireChunk; it.Next() {
		n++
		last = bytes.Clone(it.Key())
		if err := s.expireOne(b, k, it.Key(), it.Value()); err != nil {
			_ = it.Close()
			return 0, false, err
		}
	}
	more := it.Valid()
	if err := it.Close(); err != nil {
		return 0, false, fmt.Errorf("%w: %w", ErrRead, err)
	}
	if n == 0 {
		return 0, false, nil
	}
	end := hi
	if more {
		end = append(last, 0) // just after the last one handled
	}
	if err := b.DeleteRange(lo, end, nil); err != nil {
		return 0, false, fmt.Errorf("%w: %w", ErrWrite, err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return 0, false, fmt.Errorf("%w: %w", ErrWrite, err)
	}
	return n, more, nil
}

// expireOne adds to b the deletes for one expired record (its offset key
// and value).
func (s *Store) expireOne(b *pebble.Batch, k Kind, okey, oval []byte) error {
	received, tenant, id, ok := parseOffsetValue(oval)
	if !ok {
		return nil
	}
	if len(okey) != 14 {
		return nil
	}
	partition, offset := int32(binary.BigEndian.Uint32(okey[2:6])), int64(binary.BigEndian.Uint64(okey[6:14]))
	pfx := byte(pfxTimeout)
	if k == KindResults {
		pfx = pfxResult
	}
	key := intentKey(pfx, tenant, id)
	v, err := s.get(key)
	if err != nil {
		return err
	}
	if p, o, ok := at(v); !ok || p != partition || o != offset {
		return nil // a later record of the intent wrote it since
	}
	if err := b.Delete(key, nil); err != nil {
		return fmt.Errorf("%w: %w", ErrWrite, err)
	}
	if k != KindResults {
		return nil
	}
	for _, d := range [][]byte{intentKey(pfxTimeout, tenant, id), intentKey(pfxPending, tenant, id), recentKey(tenant, received, id)} {
		if err := b.Delete(d, nil); err != nil {
			return fmt.Errorf("%w: %w", ErrWrite, err)
		}
	}
	return nil
}
