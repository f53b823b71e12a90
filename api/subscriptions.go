package api

// subscribe adds to s the entries of f it does not hold yet, unless s would
// then hold more than max (errTooManySubscriptions, nothing added). Then,
// still under the lock, it calls ack with the cursor for s, and sends s the stored results of the
// newly subscribed intent ids (whose subscriptions thereby end at once). So the
// acknowledgement comes before any result it enables, and a result added
// concurrently is sent exactly once, by Add or from the store.
func (r *Results) subscribe(s *subscriber, f subscription, max int, ack func(cursor string)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	seen := make(map[string]struct{}, len(f.IntentIDs))
	for _, id := range f.IntentIDs {
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		if _, ok := s.intents[id]; !ok {
			n++
		}
	}
	if f.SessionID != "" {
		if _, ok := s.sessions[f.SessionID]; !ok {
			n++
		}
	}
	if f.IntentType != "" {
		if _, ok := s.types[f.IntentType]; !ok {
			n++
		}
	}
	if s.count()+n > max {
		return errTooManySubscriptions
	}
	s.positioned = true
	if ack != nil {
		ack(r.cursorFor(s))
	}
	if f.SessionID != "" {
		s.sessions[f.SessionID] = struct{}{}
		addIndex(r.bySession, f.SessionID, s)
	}
	if f.IntentType != "" {
		s.types[f.IntentType] = struct{}{}
		addIndex(r.byType, f.IntentType, s)
	}
	for id := range seen {
		if _, ok := s.intents[id]; ok {
			continue
		}
		// Only s's tenant's result counts: another tenant's intent with
		// this id is another intent (nothing reveals it).
		if e := r.storedFor(s, id); e != nil {
			if body := r.st.encoded(e); body != nil {
				r.send(s, frame("result", r.cursorFor(s), "result", body))
			}
			continue
		}
		s.intents[id] = struct{}{}
		addIndex(r.byIntent, id, s)
	}
	r.subscribeProgress(s, f)
	return nil
}

// unsubscribe removes the entries of f from s; entries s does not hold are
// ignored.
func (r *Results) unsubscribe(s *subscriber, f subscription) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range f.IntentIDs {
		delete(s.intents, id)
		removeIndex(r.byIntent, id, s)
	}
	if f.SessionID != "" {
		delete(s.sessions, f.SessionID)
		removeIndex(r.bySession, f.SessionID, s)
	}
	if f.IntentType != "" {
		delete(s.types, f.IntentType)
		removeIndex(r.byType, f.IntentType, s)
	}
	r.unsubscribeProgress(s, f)
}

// unsubscribeAll removes every subscription of s.
func (r *Results) unsubscribeAll(s *subscriber) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drop(s, &s.filters)
	r.unsubscribeAllProgress(s)
}

func addIndex(idx map[string]map[*subscriber]struct{}, key string, s *subscriber) {
	set, ok := idx[key]
	if !ok {
		set = map[*subscriber]struct{}{}
		idx[key] = set
	}
	set[s] = struct{}{}
}

func removeIndex(idx map[string]map[*subscriber]struct{}, key string, s *subscriber) {
	set, ok := idx[key]
	if !ok {
		return
	}
	delete(set, s)
	if len(set) == 0 {
		delete(idx, key)
	}
}
