package schemas

import (
	"errors"
	"fmt"
	"math"

	"github.com/hamba/avro/v2"
)

// hamba/avro skips the items of an array or map the reader does not have one
// by one, without stopping at the end of the input: a block count of 2^62 in
// a few bytes would keep it busy for ever. Records whose writer schema has
// arrays or maps the reader skips are therefore scanned first by scanAvro,
// which walks the bytes against the writer schema and refuses block counts
// larger than the bytes left (every item takes at least one byte), so the
// decoder only ever sees well-formed input. Our own schemas need no scan.

// maxScanDepth bounds the nesting of recursive writer schemas.
const maxScanDepth = 256

var errScanEOF = errors.New("unexpected end of record")

// scanAvro reports whether data is exactly one well-formed value of schema s.
func scanAvro(s avro.Schema, data []byte) error {
	sc := avroScanner{b: data}
	if err := sc.value(s, 0); err != nil {
		return err
	}
	if sc.pos != len(sc.b) {
		return fmt.Errorf("%d trailing bytes after the record", len(sc.b)-sc.pos)
	}
	return nil
}

type avroScanner struct {
	b   []byte
	pos int
}

func (sc *avroScanner) left() int { return len(sc.b) - sc.pos }

// varint reads a zig-zag varint of at most maxBytes bytes.
func (sc *avroScanner) varint(maxBytes int) (int64, error) {
	var u uint64
	for i := 0; i < maxBytes; i++ {
		if sc.pos >= len(sc.b) {
			return 0, errScanEOF
		}
		c := sc.b[sc.pos]
		sc.pos++
		u |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return int64(u>>1) ^ -int64(u&1), nil
		}
	}
	return 0, errors.New("varint too long")
}

func (sc *avroScanner) skip(n int64) error {
	if n < 0 || n > int64(sc.left()) {
		return errScanEOF
	}
	sc.pos += int(n)
	return nil
}

func (sc *avroScanner) value(s avro.Schema, depth int) error {
	if depth > maxScanDepth {
		return errors.New("record nested too deeply")
	}
	switch s := s.(type) {
	case *avro.RefSchema:
		return sc.value(s.Schema(), depth+1)
	case *avro.NullSchema:
		return nil
	case *avro.PrimitiveSchema:
		switch s.Type() {
		case avro.Boolean:
			return sc.skip(1)
		case avro.Int:
			_, err := sc.varint(5)
			return err
		case avro.Long:
			_, err := sc.varint(10)
			return err
		case avro.Float:
			return sc.skip(4)
		case avro.Double:
			return sc.skip(8)
		case avro.String, avro.Bytes:
			n, err := sc.varint(10)
			if err != nil {
				return err
			}
			return sc.skip(n)
		}
	case *avro.FixedSchema:
		return sc.skip(int64(s.Size()))
	case *avro.EnumSchema:
		i, err := sc.varint(5)
		if err == nil && (i < 0 || i >= int64(len(s.Symbols()))) {
			err = fmt.Errorf("enum index %d out of range", i)
		}
		return err
	case *avro.UnionSchema:
		i, err := sc.varint(10)
		if err != nil {
			return err
		}
		if i < 0 || i >= int64(len(s.Types())) {
			return fmt.Errorf("union index %d out of range", i)
		}
		return sc.value(s.Types()[i], depth+1)
	case *avro.RecordSchema:
		for _, f := range s.Fields() {
			if err := sc.value(f.Type(), depth+1); err != nil {
				return err
			}
		}
		return nil
	case *avro.ArraySchema:
		if zeroSize(s.Items(), map[avro.Schema]bool{}) {
			return errors.New("array of zero-size items")
		}
		return sc.blocks(depth, func() error { return sc.value(s.Items(), depth+1) })
	case *avro.MapSchema:
		return sc.blocks(depth, func() error {
			if err := sc.value(avro.NewPrimitiveSchema(avro.String, nil), depth+1); err != nil {
				return err
			}
			return sc.value(s.Values(), depth+1)
		})
	}
	return fmt.Errorf("unsupported schema type %s", s.Type())
}

// blocks reads array or map blocks, calling item for each item. Every item
// takes at least one byte, so a count above the bytes left is malformed.
func (sc *avroScanner) blocks(depth int, item func() error) error {
	for {
		n, err := sc.varint(10)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		size := int64(-1)
		if n < 0 {
			if n == math.MinInt64 {
				return errors.New("bad block count")
			}
			n = -n
			if size, err = sc.varint(10); err != nil {
				return err
			}
			if size < 0 || size > int64(sc.left()) {
				return errScanEOF
			}
		}
		if n > int64(sc.left()) {
			return fmt.Errorf("block of %d items in %d bytes", n, sc.left())
		}
		start := sc.pos
		for range n {
			if err := item(); err != nil {
				return err
			}
		}
		// A skipping decoder jumps by the block's size: it must be where the
		// items end, or the decoder would read from elsewhere than we did.
		if size >= 0 && int64(sc.pos-start) != size {
			return fmt.Errorf("block size %d, items take %d bytes", size, sc.pos-start)
		}
	}
}

// hasArrayOrMap reports whether s has an array or a map anywhere.
func hasArrayOrMap(s avro.Schema) bool {
	found := false
	walkSchema(s, func(s avro.Schema) bool {
		switch s.(type) {
		case *avro.ArraySchema, *avro.MapSchema:
			found = true
		}
		return !found
	})
	return found
}

// walkSchema calls visit for every schema in s once, depth first, while it
// returns true.
func walkSchema(s avro.Schema, visit func(avro.Schema) bool) {
	seen := map[avro.Schema]bool{}
	var walk func(avro.Schema) bool
	walk = func(s avro.Schema) bool {
		if ref, ok := s.(*avro.RefSchema); ok {
			s = ref.Schema()
		}
		if seen[s] {
			return true
		}
		seen[s] = true
		if !visit(s) {
			return false
		}
		switch s := s.(type) {
		case *avro.ArraySchema:
			return walk(s.Items())
		case *avro.MapSchema:
			return walk(s.Values())
		case *avro.UnionSchema:
			for _, t := range s.Types() {
				if !walk(t) {
					return false
				}
			}
		case *avro.RecordSchema:
			for _, f := range s.Fields() {
				if !walk(f.Type()) {
					return false
				}
			}
		}
		return true
	}
	walk(s)
}

// hasZeroSizeArray reports whether s has an array whose items take no bytes
// (null, fixed(0), records of such): its block counts cannot be bounded by
// the input's size, so writer schemas with such arrays are refused.
func hasZeroSizeArray(s avro.Schema) bool {
	found := false
	walkSchema(s, func(s avro.Schema) bool {
		if a, ok := s.(*avro.ArraySchema); ok && zeroSize(a.Items(), map[avro.Schema]bool{}) {
			found = true
		}
		return !found
	})
	return found
}

// zeroSize reports whether every value of s encodes in zero bytes.
func zeroSize(s avro.Schema, inProgress map[avro.Schema]bool) bool {
	if ref, ok := s.(*avro.RefSchema); ok {
		s = ref.Schema()
	}
	switch s := s.(type) {
	case *avro.NullSchema:
		return true
	case *avro.FixedSchema:
		return s.Size() == 0
	case *avro.RecordSchema:
		if inProgress[s] {
			return false
		}
		inProgress[s] = true
		defer delete(inProgress, s)
		for _, f := range s.Fields() {
			if !zeroSize(f.Type(), inProgress) {
				return false
			}
		}
		return true
	}
	return false
}
