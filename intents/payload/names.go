package payload

import (
	"encoding/json"
	"slices"
	"strconv"
)

// duplicateName finds the first object in doc, a valid JSON text, that
// names a member twice (after unescaping: "a" and "\u0061" are one name),
// and returns the JSON Pointer of that object and the name.
//
// A payload validated against an input_schema must mean one thing to every
// reader. RFC 8259 leaves duplicate names to the parser: Go, Python and
// JavaScript keep the last value, some parsers the first, others refuse
// the document. {"amount": -5, "amount": 5} would then pass a schema that
// requires a positive amount here and reach an agent that reads -5.
func duplicateName(doc []byte) (path, name string, found bool) {
	s := nameScanner{b: doc}
	s.value()
	if s.dup == nil {
		return "", "", false
	}
	return pointer(s.dupPath), *s.dup, true
}

// nameScanner walks a valid JSON text, keeping the path to where it is.
type nameScanner struct {
	b       []byte
	i       int
	path    []string
	dup     *string // the first name seen twice in one object
	dupPath []string
}

func (s *nameScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value scans one value and stops at the first duplicate.
func (s *nameScanner) value() {
	s.ws()
	if s.i >= len(s.b) {
		return
	}
	switch s.b[s.i] {
	case '{':
		s.object()
	case '[':
		s.array()
	case '"':
		s.str()
	default: // a number, true, false or null
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', ']', '}', ' ', '\t', '\n', '\r':
				return
			}
			s.i++
		}
	}
}

func (s *nameScanner) object() {
	s.i++ // {
	var names nameSet
	for s.dup == nil {
		s.ws()
		if s.b[s.i] == '}' {
			s.i++
			return
		}
		if s.b[s.i] == ',' {
			s.i++
			s.ws()
		}
		name := s.name()
		if !names.add(name) {
			s.dup, s.dupPath = &name, append([]string(nil), s.path...)
			return
		}
		s.ws()
		s.i++ // :
		s.path = append(s.path, name)
		s.value()
		s.path = s.path[:len(s.path)-1]
	}
}

// nameSet is one object's names: a slice while there are at most 16 of
// them (most objects: no map to build), a map past that.
type nameSet struct {
	few  []string
	many map[string]struct{}
}

// add records name and reports whether it is new.
func (ns *nameSet) add(name string) bool {
	if ns.many == nil {
		if slices.Contains(ns.few, name) {
			return false
		}
		if len(ns.few) < 16 {
			ns.few = append(ns.few, name)
			return true
		}
		ns.many = make(map[string]struct{}, 32)
		for _, n := range ns.few {
			ns.many[n] = struct{}{}
		}
	}
	if _, ok := ns.many[name]; ok {
		return false
	}
	ns.many[name] = struct{}{}
	return true
}

func (s *nameScanner) array() {
	s.i++ // [
	for n := 0; s.dup == nil; n++ {
		s.ws()
		if s.b[s.i] == ']' {
			s.i++
			return
		}
		if s.b[s.i] == ',' {
			s.i++
		}
		s.path = append(s.path, strconv.Itoa(n))
		s.value()
		s.path = s.path[:len(s.path)-1]
	}
}

// str skips a string and returns its raw text, quotes included.
func (s *nameScanner) str() []byte {
	start := s.i
	s.i++ // "
	for s.b[s.i] != '"' {
		if s.b[s.i] == '\\' {
			s.i++
		}
		s.i++
	}
	s.i++
	return s.b[start:s.i]
}

// name reads an object member's name as the decoder does: escapes and
// invalid UTF-8 (as U+FFFD) decoded, so that names equal to a decoder are
// equal here.
func (s *nameScanner) name() string {
	raw := s.str()
	plain := true
	for _, c := range raw[1 : len(raw)-1] {
		if c == '\\' || c >= 0x80 {
			plain = false
			break
		}
	}
	if plain {
		return string(raw[1 : len(raw)-1])
	}
	var name string
	if err := json.Unmarshal(raw, &name); err != nil {
		// Not reached for a valid JSON text; keep the raw text, which is
		// at worst a name that matches nothing.
		return string(raw)
	}
	return name
}
