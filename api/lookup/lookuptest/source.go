// Package lookuptest provides a lookup.Source held in memory, for tests and
// benchmarks of the lookup store: topics whose partitions are slices of
// records, with a topic id and a first offset that tests move (retention)
// or change (a recreated topic).
package lookuptest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/switchboard-mcp/switchboard/api/lookup"
)

// Source is an in-memory lookup.Source. Its methods are safe for
// concurrent use; Read may run while a test appends.
type Source struct {
	mu      sync.Mutex
	topics  map[string]*topic
	changed chan struct{} // closed and replaced on every change

	reads     []map[string][]int64 // per Read, the offsets it was asked to start from
	delivered int                  // records handed to handlers
}

// LastRead returns the offsets the last Read was asked to start from.
func (s *Source) LastRead() map[string][]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reads) == 0 {
		return nil
	}
	return cloneOffsets(s.reads[len(s.reads)-1])
}

// Delivered returns how many records Read handed to handlers.
func (s *Source) Delivered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.delivered
}

type topic struct {
	id    string
	parts []*partition
}

type partition struct {
	low  int64
	recs []lookup.Record // recs[i] is at offset i
}

// NewSource returns a Source without topics.
func NewSource() *Source {
	return &Source{topics: map[string]*topic{}, changed: make(chan struct{})}
}

// CreateTopic creates (or recreates, empty, under a new id) a topic.
func (s *Source) CreateTopic(name, id string, partitions int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &topic{id: id}
	for range partitions {
		t.parts = append(t.parts, &partition{})
	}
	s.topics[name] = t
	s.notify()
}

// Append adds a record to a partition and returns its offset.
func (s *Source) Append(name string, p int32, key, value []byte) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	part := s.topics[name].parts[p]
	off := int64(len(part.recs))
	part.recs = append(part.recs, lookup.Record{Topic: name, Partition: p, Offset: off, Key: key, Value: value})
	s.notify()
	return off
}

// SetLow moves a partition's first offset (retention deleted what is
// before it).
func (s *Source) SetLow(name string, p int32, low int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.topics[name].parts[p].low = low
	s.notify()
}

func (s *Source) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Describe implements lookup.Source.
func (s *Source) Describe(_ context.Context, name string) (lookup.TopicState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.topics[name]
	if !ok {
		return lookup.TopicState{}, fmt.Errorf("lookuptest: no topic %s", name)
	}
	st := lookup.TopicState{ID: t.id}
	for _, p := range t.parts {
		st.Low = append(st.Low, p.low)
		st.High = append(st.High, int64(len(p.recs)))
	}
	return st, nil
}

// Read implements lookup.Source: it hands over what the partitions hold
// beyond each position, EOF once a partition is read to its end, Idle
// when nothing is left, and waits for appends until ctx ends.
func (s *Source) Read(ctx context.Context, from map[string][]int64, h lookup.Handler) error {
	s.mu.Lock()
	s.reads = append(s.reads, cloneOffsets(from))
	topicOf := map[string]*topic{}
	pos := map[string][]int64{}
	for name, offs := range from {
		topicOf[name] = s.topics[name]
		pos[name] = slices.Clone(offs)
	}
	s.mu.Unlock()
	atEnd := map[string]map[int]bool{}
	for {
		s.mu.Lock()
		changed := s.changed
		var batch []lookup.Record
		var eofs []lookup.Record
		for name, offs := range pos {
			t := topicOf[name]
			if atEnd[name] == nil {
				atEnd[name] = map[int]bool{}
			}
			for p := range offs {
				if p >= len(t.parts) {
					continue
				}
				part := t.parts[p]
				if offs[p] < part.low {
					offs[p] = part.low // librdkafka's auto.offset.reset=earliest
				}
				n := 0
				for offs[p] < int64(len(part.recs)) && n < 64 {
					batch = append(batch, part.recs[offs[p]])
					offs[p]++
					n++
				}
				if n > 0 {
					atEnd[name][p] = false
				}
				if offs[p] == int64(len(part.recs)) && !atEnd[name][p] {
					atEnd[name][p] = true
					eofs = append(eofs, lookup.Record{Topic: name, Partition: int32(p)})
				}
			}
		}
		s.delivered += len(batch)
		s.mu.Unlock()
		for i := range batch {
			if err := h.Record(&batch[i]); err != nil {
				return err
			}
		}
		for _, e := range eofs {
			if err := h.EOF(e.Topic, e.Partition); err != nil {
				return err
			}
		}
		if len(batch) > 0 {
			continue
		}
		if err := h.Idle(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

func cloneOffsets(m map[string][]int64) map[string][]int64 {
	out := make(map[string][]int64, len(m))
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}
