package api

import "net/http"

// SubscribeSession subscribes fn to the results of a session, as a stream
// connection would, and returns a function that ends the subscription. fn is
// called with the Results lock held and must not block.
func SubscribeSession(r *Results, sessionID string, fn func(msg []byte)) (unsubscribe func()) {
	s := newSubscriber(sinkFunc(fn))
	_ = r.subscribe(s, subscription{SessionID: sessionID}, 1, nil)
	return func() { r.unsubscribeAll(s) }
}

type sinkFunc func([]byte)

func (f sinkFunc) deliver(b []byte) { f(b) }

// Middleware wraps h in the server's middleware (observe, limitBody,
// recoverer).
func Middleware(s *Server, h http.Handler) http.Handler {
	return s.observe(s.limitBody(s.recoverer(h)))
}

// CheckConns runs the keepalive check once, now.
func CheckConns(s *Server) { s.checkConns() }

// WriteInProgress reports whether some stream connection's writer is in a
// blocking write (what the keepalive check times).
func WriteInProgress(s *Server) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.writingSince.Load() != 0 {
			return true
		}
	}
	return false
}
