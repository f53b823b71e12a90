package schemas

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
)

// snapshotV2 is ContextSnapshot as a newer writer has it, with fields our
// reader skips: a map and an array.
const snapshotV2 = `{"type":"record","name":"ContextSnapshot","namespace":"mcp.switchboard","fields":[
	{"name":"entity_id","type":"string"},
	{"name":"labels","type":{"type":"map","values":"long"},"default":{}},
	{"name":"snapshot_ts","type":"long"},
	{"name":"version","type":"long"},
	{"name":"features","type":{"type":"map","values":"double"}},
	{"name":"history","type":{"type":"array","items":"string"},"default":[]}
]}`

// zigzag encodes v as an Avro long.
func zigzag(v int64) []byte {
	return binary.AppendUvarint(nil, uint64(v<<1)^uint64(v>>63))
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// decodeWithin decodes data, failing the test if that takes more than a
// second (the decoder looping over a huge block count).
func decodeWithin(t *testing.T, c *Codec, data []byte, r Record) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Decode(data, r) }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Second):
		t.Fatal("Decode did not return within a second") // the goroutine spins on
		return nil
	}
}

// A record claiming 2^62 items in a skipped map or array, or lying about a
// block's size, is rejected at once, not looped over.
func TestSkippedBlockBombs(t *testing.T) {
	c, fake := newInProcessCodec(t)
	valid := writeWith(t, fake, "bomb-value", snapshotV2, map[string]any{
		"entity_id": "e", "labels": map[string]int64{"a": 1}, "snapshot_ts": int64(1), "version": int64(2),
		"features": map[string]float64{"x": 1}, "history": []string{"h"},
	})
	var cs ContextSnapshot
	if err := c.Decode(valid, &cs); err != nil || cs.EntityID != "e" || cs.Features["x"] != 1 {
		t.Fatalf("valid record: %+v, %v", cs, err)
	}
	hdr := valid[:wireHeaderLen]
	entity := cat(zigzag(1), []byte("e"))
	tail := cat(zigzag(1), zigzag(2), zigzag(0), zigzag(0)) // ts, version, no features, no history
	for name, labels := range map[string][]byte{
		"huge count":                 cat(zigzag(1<<62), zigzag(1), []byte("k"), zigzag(5)),
		"huge negative count":        cat(zigzag(-(1 << 62)), zigzag(0), zigzag(1), []byte("k"), zigzag(5)),
		"size shorter than items":    cat(zigzag(-1), zigzag(1), zigzag(1), []byte("k"), zigzag(5), zigzag(0)),
		"size longer than items":     cat(zigzag(-1), zigzag(4), zigzag(1), []byte("k"), zigzag(5), zigzag(0), zigzag(1<<62)),
		"count beyond the input end": cat(zigzag(3), zigzag(1), []byte("k"), zigzag(5)),
	} {
		t.Run(name, func(t *testing.T) {
			err := decodeWithin(t, c, cat(hdr, entity, labels, tail), new(ContextSnapshot))
			if ErrorClass(err) != ClassMalformedAvro {
				t.Fatalf("class %q: %v", ErrorClass(err), err)
			}
		})
	}
	// A block whose size is right is fine.
	ok := cat(hdr, entity, zigzag(-1), zigzag(3), zigzag(1), []byte("k"), zigzag(5), zigzag(0), tail)
	if err := c.Decode(ok, new(ContextSnapshot)); err != nil {
		t.Fatalf("sized block: %v", err)
	}
}

// Writer schemas with arrays of items that take no bytes are refused: their
// block counts cannot be bounded by the input's size.
func TestZeroSizeArraysRefused(t *testing.T) {
	c, fake := newInProcessCodec(t)
	for junk, empty := range map[string]any{
		`{"type":"array","items":"null"}`:                                                                                              []any{},
		`{"type":"array","items":{"type":"fixed","name":"F","size":0}}`:                                                                []any{},
		`{"type":"array","items":{"type":"record","name":"E","fields":[]}}`:                                                            []any{},
		`{"type":"map","values":["null",{"type":"array","items":{"type":"record","name":"N","fields":[{"name":"n","type":"null"}]}}]}`: map[string]any{},
	} {
		text := `{"type":"record","name":"ContextSnapshot","namespace":"mcp.switchboard","fields":[` +
			`{"name":"junk","type":` + junk + `},` +
			`{"name":"entity_id","type":"string"},{"name":"snapshot_ts","type":"long"},{"name":"version","type":"long"},` +
			`{"name":"features","type":{"type":"map","values":"double"}}]}`
		s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
		if err != nil {
			t.Fatal(err)
		}
		if !hasZeroSizeArray(s) {
			t.Errorf("%s: not seen as a zero-size array", junk)
		}
		b := writeWith(t, fake, "zero-value", text, map[string]any{
			"junk": empty, "entity_id": "e", "snapshot_ts": int64(1), "version": int64(1), "features": map[string]float64{},
		})
		b = cat(b[:wireHeaderLen], zigzag(1<<62), b[wireHeaderLen:])
		if err := decodeWithin(t, c, b, new(ContextSnapshot)); ErrorClass(err) != ClassIncompatibleSchema {
			t.Errorf("%s: class %q: %v", junk, ErrorClass(err), err)
		}
	}
	for _, s := range []string{
		`{"type":"array","items":"int"}`,
		`{"type":"record","name":"Node","fields":[{"name":"next","type":["null",{"type":"array","items":"Node"}]}]}`,
	} {
		if hasZeroSizeArray(avro.MustParse(s)) {
			t.Errorf("%s: seen as a zero-size array", s)
		}
	}
}

// scanAvro accepts every well-formed record and rejects every truncation.
func TestScanAvro(t *testing.T) {
	c, _ := newInProcessCodec(t)
	for _, r := range sampleRecords() {
		b := mustEncode(t, c, EncodingAvro, "scan", r)[wireHeaderLen:]
		s := c.schemas[r.kind()].schema
		if err := scanAvro(s, b); err != nil {
			t.Fatalf("%T: %v", r, err)
		}
		for i := range b {
			if err := scanAvro(s, b[:i]); err == nil {
				t.Fatalf("%T: truncated at %d/%d accepted", r, i, len(b))
			}
		}
		if err := scanAvro(s, append(b, 0)); err == nil || !strings.Contains(err.Error(), "trailing") {
			t.Fatalf("%T: trailing byte: %v", r, err)
		}
	}

	// Recursion depth is bounded.
	list := avro.MustParse(`{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]}]}`)
	shallow := cat([]byte{2, 2, 2}, []byte{0})
	if err := scanAvro(list, shallow); err != nil {
		t.Fatalf("shallow list: %v", err)
	}
	deep := append([]byte(strings.Repeat("\x02", 10000)), 0)
	if err := scanAvro(list, deep); err == nil {
		t.Fatal("10000-deep list accepted")
	}
}
