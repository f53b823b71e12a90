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
