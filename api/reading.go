package api

import (
	"fmt"
	"math"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxReadingBytes is the default of Config.MaxReadingBytes
// (http.max_reading_bytes): what the bodies being read may hold on one
// instance. 64 full bodies of DefaultMaxBodyBytes, or thousands of ordinary
// ones (an intent of a few KiB arrives in a millisecond, so even at the
// 2-core knee of 3,000-4,000 intents/s a few MiB are being read at once);
// a quarter of DefaultMaxWaitingBytes. Without it 20,000 slow senders (serve's
// descriptors) could hold 20 GiB. MaxReadingBytesPerTenant's default is half.
const DefaultMaxReadingBytes = 64 << 20

// ReasonReading is the reason of a request refused before its body is
// read: the bodies being read on this instance (or the caller's tenant's)
// already hold Config.MaxReadingBytes (or MaxReadingBytesPerTenant).
const ReasonReading = "reading"

// Every request with a body reserves it before the body is read, after
// the guard has authenticated the caller (so a caller without a credential
// reserves nothing, and the tenant's share applies):
//
//   - the reservation is the body's Content-Length, or Config.MaxBodyBytes
//     when it is not declared (chunked);
//   - it is released when the body has been read to its end, when the
//     body read timer fires (Config.BodyReadTimeout: nothing more can be
//     read then, so a handler that never reads its body, an event stream,
//     holds it no longer), or when the request ends (408 body_timeout, the
//     client gone, an answer written without reading it), whichever comes
//     first: a ?wait request holds its body in the wait limit's bytes
//     afterwards, not here;
//   - one more over Config.MaxReadingBytes, or the tenant's
//     MaxReadingBytesPerTenant, is answered 503 overloaded (reason
//     "reading", Retry-After: 1, Connection: close) without reading a byte
//     of its body. As with the wait limit's bytes, one body of any size is
//     let in when none of its scope is being read.
//
// This bounds what slow senders hold however many connections they open:
// the bytes they declare, not their count, are what is bounded.

// newReadingSlots returns the reservations of bodies being read, bounded
// by cfg, with their gauges registered with reg.
func newReadingSlots(cfg Config, reg prometheus.Registerer) (*slots, error) {
	sl, err := newSlots(ReasonReading, math.MaxInt, math.MaxInt, prometheus.GaugeOpts{
		Name: "switchboard_api_reading_requests",
		Help: "Requests whose body is being read on this instance (their bytes bounded by http.max_reading_bytes).",
	}, reg)
	if err != nil {
		return nil, err
	}
	if err := sl.boundBytes(cfg.MaxReadingBytes, cfg.MaxReadingBytesPerTenant, prometheus.GaugeOpts{
		Name: "switchboard_api_reading_bytes",
		Help: "Bytes reserved by the request bodies being read on this instance: each body's Content-Length, or http.max_body_bytes when chunked (bounded by http.max_reading_bytes).",
	}, reg); err != nil {
		return nil, err
	}
	return sl, nil
}

// reserveBody applies the rules above. It runs after the guard, inside
// limitBody, whose requestBody it releases the reservation with.
func (s *Server) reserveBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := r.Body.(*requestBody)
		if !ok || !b.unread() {
			next.ServeHTTP(w, r)
			return
		}
		size := r.ContentLength
		if size < 0 {
			size = s.cfg.MaxBodyBytes
		}
		release, ref := s.reading.acquire(tenantPtr(principalFrom(r.Context())), size)
		if ref != nil {
			writeRefusal(w, ref)
			return
		}
		defer release()
		b.onFinish(release)
		next.ServeHTTP(w, r)
	})
}

// readingError is a refusal's one line when its reason is ReasonReading.
func (r *Refusal) readingError() string {
	who, key := "the requests being read here hold", "http.max_reading_bytes"
	if r.Tenant != nil {
		who, key = fmt.Sprintf("tenant %q's requests being read here hold", *r.Tenant), "http.max_reading_bytes_per_tenant"
	}
	return fmt.Sprintf("overloaded (reading): %s %d bytes of bodies, and this one's %d would pass its %s, %d; nothing was read or published, retry in %s",
		who, r.HeldBytes, r.Bytes, key, r.ByteLimit, r.RetryAfter)
}
