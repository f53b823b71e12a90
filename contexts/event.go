package contexts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/schemas"
)

// EventFormat says how to read a JSON event: which field names the entity,
// which its tenant, which holds the event time, and which numeric fields the
// features read. Field names are dotted paths into nested objects
// ("user.id").
type EventFormat struct {
	KeyField string
	// TenantField holds the tenant whose namespace the entity is in (a
	// string); empty: every event's entity is in tenant Tenant's.
	TenantField string
	// Tenant is the tenant of every event when TenantField is empty ("":
	// none).
	Tenant string
	// TimeField holds unix milliseconds or an RFC 3339 time; empty uses
	// the record timestamp.
	TimeField string
	Fields    []string
}

// Decode reads one event. The key may be a string or a number; it and the
// tenant must be what an intent's context_ref and tenant can hold
// (printable, no spaces). A field the features read that is missing or not a
// number leaves the event out of those features only. A missing key or
// tenant, or an unreadable time, is an error.
func (f EventFormat) Decode(value []byte, recordTsMs int64) (Event, error) {
	if err := schemas.CheckJSONText(value); err != nil {
		return Event{}, fmt.Errorf("%w: the event is not Unicode text: %w", ErrInvalidAggregate, err)
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil || doc == nil {
		return Event{}, fmt.Errorf("%w: the event is not a JSON object", ErrInvalidAggregate)
	}
	ev := Event{TimeMs: recordTsMs, ArrivalMs: recordTsMs, Values: map[string]float64{}}
	switch k := lookup(doc, f.KeyField).(type) {
	case string:
		ev.Key = k
	case json.Number:
		ev.Key = k.String()
	}
	if ev.Key == "" {
		return Event{}, fmt.Errorf("%w: the event has no key field %q (a string or a number)", ErrInvalidAggregate, f.KeyField)
	}
	ev.Tenant = f.Tenant
	if f.TenantField != "" {
		t, _ := lookup(doc, f.TenantField).(string)
		if t == "" {
			return Event{}, fmt.Errorf("%w: the event has no tenant field %q (a string)", ErrInvalidAggregate, f.TenantField)
		}
		ev.Tenant = t
	}
	if err := checkEntity(ev.Tenant, ev.Key); err != nil {
		return Event{}, fmt.Errorf("%w: %w", ErrInvalidAggregate, err)
	}
	if f.TimeField != "" {
		switch t := lookup(doc, f.TimeField).(type) {
		case json.Number:
			ms, err := t.Int64()
			if err != nil {
				return Event{}, fmt.Errorf("%w: time field %q is %s, not unix milliseconds", ErrInvalidAggregate, f.TimeField, t)
			}
			ev.TimeMs = ms
		case string:
			ts, err := time.Parse(time.RFC3339Nano, t)
			if err != nil {
				return Event{}, fmt.Errorf("%w: time field %q is %q, not an RFC 3339 time", ErrInvalidAggregate, f.TimeField, t)
			}
			ev.TimeMs = ts.UnixMilli()
		default:
			return Event{}, fmt.Errorf("%w: the event has no time field %q", ErrInvalidAggregate, f.TimeField)
		}
	}
	for _, name := range f.Fields {
		if n, ok := lookup(doc, name).(json.Number); ok {
			if v, err := n.Float64(); err == nil {
				ev.Values[name] = v
			}
		}
	}
	return ev, nil
}

// lookup follows a dotted path into doc.
func lookup(doc map[string]any, path string) any {
	var cur any = doc
	for part := range strings.SplitSeq(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	return cur
}
