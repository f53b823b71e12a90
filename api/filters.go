package api

// filters is a set of stream subscriptions: to intent ids, sessions and
// intent types. A subscriber has one for what it subscribed to and one for
// the subset that asked for progress. Guarded by Results.mu.
type filters struct {
	intents, sessions, types map[string]struct{}
}

func (f *filters) count() int { return len(f.intents) + len(f.sessions) + len(f.types) }

// match is the one rule by which a record of an intent (its id, session and
// type) reaches a subscriber: it matches when the subscriber subscribed to
// the intent's id, its session or its type. byID says the id matched (an
// intent-id subscription ends with the intent's result). The live fan-out
// finds the same subscribers through the hub's indexes, which hold exactly
// these sets inverted ([index.reach]).
func (f *filters) match(id string, session *string, intentType string) (ok, byID bool) {
	if _, ok := f.intents[id]; ok {
		return true, true
	}
	if session != nil {
		if _, ok := f.sessions[*session]; ok {
			return true, false
		}
	}
	_, ok = f.types[intentType]
	return ok, false
}

// index inverts the filters of every subscriber: who subscribed to an intent
// id, a session, an intent type. The hub keeps one for results and timeout
// events, its progress side one for progress. Guarded by Results.mu.
type index struct {
	byIntent, bySession, byType map[string]map[*subscriber]struct{}
}

// reach calls fn for each subscriber in x whose filters match a record of an
// intent (its id, session and type) by the rule of [filters.match]: those
// that subscribed to its id (byID), then to its session, then to its type. A
// subscriber matched more than once is called more than once (the hub's
// deliver sends once per fan-out). fn may remove the subscriber it is called
// with from x.
func (x *index) reach(id string, session *string, intentType string, fn func(s *subscriber, byID bool)) {
	for s := range x.byIntent[id] {
		fn(s, true)
	}
	if session != nil {
		for s := range x.bySession[*session] {
			fn(s, false)
		}
	}
	for s := range x.byType[intentType] {
		fn(s, false)
	}
}

// drop removes s, whose filters are f, from x, and empties f.
func (x *index) drop(s *subscriber, f *filters) {
	for id := range f.intents {
		removeIndex(x.byIntent, id, s)
	}
	for id := range f.sessions {
		removeIndex(x.bySession, id, s)
	}
	for t := range f.types {
		removeIndex(x.byType, t, s)
	}
	clear(f.intents)
	clear(f.sessions)
	clear(f.types)
}
