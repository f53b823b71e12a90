package config

import (
	"maps"
	"reflect"
	"slices"
	"strings"
)

// What a running 'switchboard serve' can take from a reread file (SIGHUP, or
// POST /v1/admin/reload): every intent type (added, removed or changed),
// router.default_timeout (it reaches the router through the intent types'
// timeouts), and each agent's admission and breaker (max_in_flight, rate,
// queue_limit, overload, circuit_breaker). Everything else (Kafka, topics, delivery,
// the other router settings, http, contexts, telemetry, log, and the set of
// agents with their topics, groups and encodings) needs a restart.

// reloadableAgentKeys are the keys of an agent a reload may change.
var reloadableAgentKeys = map[string]bool{
	"max_in_flight": true, "rate": true, "queue_limit": true, "overload": true, "circuit_breaker": true,
	"demo": true, // serve ignores it
}

// RestartKeys returns the dotted keys whose values differ between old and
// next and that a running instance cannot take without a restart, sorted.
// Empty means next can be applied to an instance running old. Both must have
// been loaded the same way (Load or Parse, with the same overrides).
func RestartKeys(old, next *Config) []string {
	var keys []string
	add := func(path []string) { keys = append(keys, strings.Join(path, ".")) }
	ov, nv := reflect.ValueOf(old).Elem(), reflect.ValueOf(next).Elem()
	for i := range ov.NumField() {
		f := ov.Type().Field(i)
		name := yamlName(f)
		if name == "" {
			continue
		}
		switch name {
		case "intents":
			continue
		case "agents":
			diffAgents(old.Agents, next.Agents, add)
			continue
		case "router":
			o, n := old.Router, next.Router
			o.DefaultTimeout, n.DefaultTimeout = 0, 0
			diffValues([]string{name}, reflect.ValueOf(o), reflect.ValueOf(n), add)
			continue
		}
		diffValues([]string{name}, ov.Field(i), nv.Field(i), add)
	}
	slices.Sort(keys)
	return keys
}

// diffAgents reports agents added or removed, and the changed keys of the
// others but their admission and breaker.
func diffAgents(old, next map[string]*Agent, add func([]string)) {
	for _, name := range slices.Sorted(maps.Keys(old)) {
		if next[name] == nil {
			add([]string{"agents", name})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(next)) {
		o := old[name]
		if o == nil {
			add([]string{"agents", name})
			continue
		}
		ov, nv := reflect.ValueOf(o).Elem(), reflect.ValueOf(next[name]).Elem()
		for i := range ov.NumField() {
			key := yamlName(ov.Type().Field(i))
			if key == "" || reloadableAgentKeys[key] {
				continue
			}
			diffValues([]string{"agents", name, key}, ov.Field(i), nv.Field(i), add)
		}
	}
}

// diffValues reports the paths under which a and b differ: down to the
// fields of structs and the keys of maps; lists and scalars as a whole.
func diffValues(path []string, a, b reflect.Value, add func([]string)) {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				add(path)
			}
			return
		}
		diffValues(path, a.Elem(), b.Elem(), add)
	case reflect.Struct:
		for i := range a.NumField() {
			f := a.Type().Field(i)
			name := yamlName(f)
			if name == "" {
				continue
			}
			p := path
			if !strings.Contains(f.Tag.Get("yaml"), ",inline") {
				p = append(slices.Clip(path), name)
			}
			diffValues(p, a.Field(i), b.Field(i), add)
		}
	case reflect.Map:
		keys := map[string]reflect.Value{}
		for _, m := range []reflect.Value{a, b} {
			for _, k := range m.MapKeys() {
				keys[k.String()] = k
			}
		}
		for _, name := range slices.Sorted(maps.Keys(keys)) {
			k := keys[name]
			av, bv := a.MapIndex(k), b.MapIndex(k)
			p := append(slices.Clip(path), name)
			if !av.IsValid() || !bv.IsValid() {
				add(p)
				continue
			}
			diffValues(p, av, bv, add)
		}
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			add(path)
		}
	}
}

// yamlName is a field's key in the file; "" for fields the file does not
// hold (unexported, or yaml:"-"). An inline field's name is its own but its
// keys are its fields'.
func yamlName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	switch name {
	case "-":
		return ""
	case "":
		return strings.ToLower(f.Name)
	}
	return name
}
