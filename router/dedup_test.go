package router

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/switchboard-mcp/switchboard/intents"
)

// TestResolvedWindowMatchesModel: over random puts, rollbacks, rotations
// and partitions given up, the window finds exactly the keys a plain model
// holds, and its index by id holds exactly those keys (get and put trust
// the index to skip the generations).
func TestResolvedWindowMatchesModel(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	const span = 10
	w := newResolvedWindow(span*(generations-1), 0)
	w.undo = true
	type entry struct {
		gen       int // the rotation it was put in
		partition int32
		committed bool
	}
	model := map[string]entry{}
	rotations, now := 0, int64(0)
	keyOf := func() string {
		id := "i" + strconv.Itoa(rnd.IntN(40))
		switch rnd.IntN(3) {
		case 0:
			return id
		case 1:
			return intents.Scoped("a", id)
		}
		return intents.Scoped("b", id)
	}
	for step := range 20000 {
		switch op := rnd.IntN(10); {
		case op < 5:
			key, part := keyOf(), int32(rnd.IntN(3))
			w.add(key, resolvedEntry{partition: part})
			model[key] = entry{gen: rotations, partition: part}
		case op == 5:
			w.rollback()
			for k, e := range model {
				if !e.committed {
					delete(model, k)
				}
			}
		case op == 6:
			w.commit()
			for k, e := range model {
				e.committed = true
				model[k] = e
			}
		case op == 7:
			now += int64(rnd.IntN(3 * span))
			w.rotate(now, func(map[string]resolvedEntry) {})
			rotations = int(now / span)
			for k, e := range model {
				if rotations-e.gen >= generations {
					delete(model, k)
				}
			}
		case op == 8:
			part := int32(rnd.IntN(3))
			w.forgetPartition(part)
			for k, e := range model {
				if e.partition == part {
					delete(model, k)
				}
			}
		default:
			key := keyOf()
			_, got := w.get(key)
			if _, want := model[key]; got != want {
				t.Fatalf("step %d: get(%q) = %v, the model says %v", step, key, got, want)
			}
		}
		n := 0
		for _, s := range w.ids {
			n += 1 + len(s.more)
		}
		if n != len(model) {
			t.Fatalf("step %d: the index holds %d keys, the model %d", step, n, len(model))
		}
		for k := range model {
			if !w.ids.has(k) {
				t.Fatalf("step %d: %q is in the window but not in its index", step, k)
			}
		}
	}
}
