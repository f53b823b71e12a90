package config

import (
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// checkShape walks the YAML document beside the Go type it is decoded into
// and reports, with the exact dotted key and the line of the value, every
// key the type does not know and every value that cannot become its field
// (`partitions: six`, `max_in_flight: 1.5`, a list where a mapping belongs).
// yaml.v3's own errors give only a line, which names the wrong key when a
// flow mapping (`topics: {partitions: six}`) puts several keys on one line,
// and they speak of Go types; this speaks of the file. The decoder still
// runs afterwards and reports anything this walk does not model.
func checkShape(file string, root *yaml.Node, t reflect.Type) Errors {
	w := shapeWalk{file: file}
	n := root
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil
		}
		n = n.Content[0]
	}
	w.value(n, t, nil)
	return w.errs
}

type shapeWalk struct {
	file string
	errs Errors
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

func (w *shapeWalk) add(n *yaml.Node, path []string, format string, args ...any) {
	w.errs = append(w.errs, &Error{File: w.file, Line: n.Line, Key: strings.Join(path, "."), Msg: fmt.Sprintf(format, args...)})
}

func (w *shapeWalk) value(n *yaml.Node, t reflect.Type, path []string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // absent: the default applies
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			w.add(n, path, "%s", strings.TrimSpace(yamlLineRE.ReplaceAllString(err.Error(), "$2")))
		}
		return
	}
	switch t.Kind() {
	case reflect.Interface:
		return // any value (a static fallback answer)
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			w.add(n, path, "want a mapping of keys, not a %s", shapeName(n))
			return
		}
		fields := yamlFields(t)
		w.mapping(n, func(key *yaml.Node, v *yaml.Node) {
			f, ok := fields[key.Value]
			if !ok {
				w.add(key, append(path, key.Value), "unknown key %q (check its spelling and indentation)", key.Value)
				return
			}
			w.value(v, f, append(path, key.Value))
		})
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			w.add(n, path, "want a mapping of names, not a %s", shapeName(n))
			return
		}
		w.mapping(n, func(key *yaml.Node, v *yaml.Node) {
			w.value(v, t.Elem(), append(path, key.Value))
		})
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			w.add(n, path, "want a list, not a %s", shapeName(n))
			return
		}
		for i, item := range n.Content {
			w.value(item, t.Elem(), append(path, fmt.Sprint(i)))
		}
	default:
		if n.Kind != yaml.ScalarNode {
			w.add(n, path, "want %s, not a %s", scalarWant(t), shapeName(n))
			return
		}
		// yaml.v3 truncates a float into an integer field (1.5 becomes 1).
		isInt := t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64
		if err := n.Decode(reflect.New(t).Interface()); err != nil || (isInt && n.ShortTag() != "!!int") {
			w.add(n, path, "%q is not %s", n.Value, scalarWant(t))
		}
	}
}

// mapping calls each with every key and value of n. A mapping with a merge
// key (<<) is left to the decoder. (Paths built by appending may share a
// backing array between siblings: each is joined into a string at once.)
func (w *shapeWalk) mapping(n *yaml.Node, each func(key, v *yaml.Node)) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "<<" {
			return
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		each(n.Content[i], n.Content[i+1])
	}
}

// yamlFields maps the YAML keys of struct t to their field types, inline
// structs included.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if strings.Contains(","+opts+",", ",inline,") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range yamlFields(ft) {
					out[k] = v
				}
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

func scalarWant(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int64:
		return "a whole number"
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("a whole number that fits %s", t.Kind())
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a text value"
	default:
		return "a " + t.Kind().String()
	}
}

func shapeName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	default:
		return fmt.Sprintf("value (%q)", n.Value)
	}
}
