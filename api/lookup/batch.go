package lookup

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// Batch is a set of writes applied to the store at once by Commit: the
// records read since the last commit and the positions they moved the
// store to, so that a restart resumes exactly where the data ends. A Batch
// is used by one goroutine.
type Batch struct {
	s *Store
	b *pebble.Batch
	n int
	// changelog holds the changelog-key mappings written in this batch
	// (nil: deleted), which the database does not show before Commit.
	changelog map[string][]byte
	// pending holds the pending-state keys written in this batch.
	pending map[string]struct{}
}

// NewBatch returns an empty batch.
func (s *Store) NewBatch() *Batch {
	return &Batch{s: s, b: s.db.NewBatch(), changelog: map[string][]byte{}, pending: map[string]struct{}{}}
}

// Len returns the number of records in the batch.
func (b *Batch) Len() int { return b.n }

// Commit applies the batch and empties it. Commits are not synced to disk:
// after a crash of the machine the store resumes from an earlier position
// (the write-ahead log is replayed up to its last whole batch), never
// inconsistent with it.
func (b *Batch) Commit() error {
	if b.b.Empty() {
		return nil
	}
	b.s.mu.Lock()
	err := b.b.Commit(pebble.NoSync)
	b.s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrWrite, err)
	}
	b.b.Reset()
	b.n = 0
	clear(b.changelog)
	clear(b.pending)
	return nil
}

// Close releases the batch without applying what it holds.
func (b *Batch) Close() { _ = b.b.Close() }

// putAt returns the value of a record read at partition/offset: where it
// came from (for expiry), then its JSON.
func putAt(partition int32, offset int64, v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 12, 12+len(body))
	binary.BigEndian.PutUint32(out, uint32(partition))
	binary.BigEndian.PutUint64(out[4:], uint64(offset))
	return append(out, body...), nil
}

// Result stores a result read at partition/offset of the results topic:
// the intent's answer from now on (its pending state is dropped), in its
// tenant's list, and expired with that record.
func (b *Batch) Result(partition int32, offset int64, res *schemas.IntentResult) error {
	tenant, id := deref(res.Tenant), res.IntentID
	v, err := putAt(partition, offset, res)
	if err != nil {
		return fmt.Errorf("%w: result %q: %w", ErrWrite, id, err)
	}
	b.n++
	errs := []error{
		b.b.Set(intentKey(pfxResult, tenant, id), v, nil),
		b.b.Set(recentKey(tenant, res.Timeline.ReceivedAt, id), nil, nil),
		b.b.Set(offsetKey(KindResults, partition, offset), offsetValue(res.Timeline.ReceivedAt, tenant, id), nil),
	}
	// Drop a pending state, if there is one: most results have none here
	// (its tombstone came first, or it was never written), and a blind
	// delete per result would leave millions of tombstones to compact.
	pk := intentKey(pfxPending, tenant, id)
	if _, inBatch := b.pending[string(pk)]; inBatch {
		errs = append(errs, b.b.Delete(pk, nil))
	} else if v, err := b.s.get(pk); err != nil {
		return err
	} else if v != nil {
		errs = append(errs, b.b.Delete(pk, nil))
	}
	return b.all(errs...)
}

// Timeout stores a timeout event read at partition/offset of the timeouts
// topic.
func (b *Batch) Timeout(partition int32, offset int64, t *schemas.IntentTimeout) error {
	tenant, id := deref(t.Tenant), t.IntentID
	v, err := putAt(partition, offset, t)
	if err != nil {
		return fmt.Errorf("%w: timeout %q: %w", ErrWrite, id, err)
	}
	b.n++
	return b.all(
		b.b.Set(intentKey(pfxTimeout, tenant, id), v, nil),
		b.b.Set(offsetKey(KindTimeouts, partition, offset), offsetValue(0, tenant, id), nil),
	)
}

// Pending stores the state of a pending changelog record (Kafka key key,
// of partition) for the intent its value names: (tenant, intent_id) of the
// value, whatever the key's form. A record with resolved_at set keeps the
// intent "resolving" until its result is read.
func (b *Batch) Pending(partition int32, key []byte, p *schemas.PendingIntent) error {
	tenant, id := deref(p.Tenant), p.IntentID
	st := pendingState(p)
	v, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("%w: pending %q: %w", ErrWrite, id, err)
	}
	ik := intentKey(0, tenant, id)
	ck := changelogKey(partition, key)
	pk := intentKey(pfxPending, tenant, id)
	b.changelog[string(ck)] = ik
	b.pending[string(pk)] = struct{}{}
	b.n++
	errs := []error{
		b.b.Set(pk, v, nil),
		b.b.Set(ck, ik, nil),
	}
	if st.State != api.PendingResolving && p.ReceivedAt != 0 {
		errs = append(errs, b.b.Set(recentKey(tenant, p.ReceivedAt, id), nil, nil))
	}
	return b.all(errs...)
}

// PendingTombstone forgets the pending state of the intent whose changelog
// record (key key, of partition) is tombstoned.
func (b *Batch) PendingTombstone(partition int32, key []byte) error {
	b.n++
	ck := changelogKey(partition, key)
	ik, seen := b.changelog[string(ck)]
	if !seen {
		v, err := b.s.get(ck)
		if err != nil {
			return err
		}
		ik = v
	}
	if ik == nil {
		return nil // never seen (compacted away before we read it), or already gone
	}
	b.changelog[string(ck)] = nil
	ik[0] = pfxPending
	return b.all(b.b.Delete(ik, nil), b.b.Delete(ck, nil))
}

// Advance records that the topic of kind k has been read up to next
// (exclusive) on partition.
func (b *Batch) Advance(k Kind, partition int32, next int64) error {
	return b.all(b.b.Set(posKey(k, partition), binary.BigEndian.AppendUint64(nil, uint64(next)), nil))
}

// SetTopic records which topic the store reads for kind k.
func (b *Batch) SetTopic(k Kind, t TopicMeta) error {
	return b.all(b.b.Set(topicKey(k), []byte(t.Name+"\x00"+t.ID), nil))
}

func (b *Batch) all(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("%w: %w", ErrWrite, err)
		}
	}
	return nil
}

// pendingState is what a lookup shows of a changelog record.
func pendingState(p *schemas.PendingIntent) *api.PendingState {
	st := &api.PendingState{
		State: api.PendingDispatched, IntentType: p.IntentType, Agent: p.Agent,
		ReceivedAt: p.ReceivedAt, DispatchedAt: p.DispatchedAt, Deadline: p.Deadline, Attempt: p.Attempt,
	}
	if p.IdleDeadline != nil {
		st.IdleDeadline = *p.IdleDeadline
	}
	switch {
	case p.ResolvedAt != nil:
		st.State = api.PendingResolving
		if p.Outcome != nil {
			st.Outcome = *p.Outcome
		}
	case p.Queued != nil && *p.Queued:
		st.State, st.DispatchedAt = api.PendingQueued, 0
	case p.RetryAt != nil:
		st.State, st.RetryAt = api.PendingRetrying, *p.RetryAt
	}
	return st
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
