package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	"github.com/jonboulle/clockwork"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/router/telemetry"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// submitIntent serves POST /v1/intents[?wait=DURATION].
func (s *Server) submitIntent(w http.ResponseWriter, r *http.Request) {
	wait, err := parseWait(r.URL.Query(), s.cfg.MaxWait)
	if err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidParameter, err.Error(), "wait")
		return
	}
	stream, err := parseStream(r.URL.Query())
	if err == nil && stream && wait > 0 {
		err = errors.New("wait and stream=sse do not combine: the stream ends with the result")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidParameter, err.Error(), "stream")
		return
	}
	req, ok := s.decodeIntent(w, r)
	if !ok {
		return
	}
	p := principalFrom(r.Context())
	if !stampTenant(w, p, req) {
		return
	}
	key, explicitID, fp := r.Header.Get("Idempotency-Key"), req.IntentID != "", fingerprint(req)
	if len(key) > maxIdempotencyKeyLen {
		writeError(w, http.StatusBadRequest, codeInvalidParameter,
			fmt.Sprintf("the Idempotency-Key header is longer than %d bytes", maxIdempotencyKeyLen), "Idempotency-Key")
		return
	}
	now := s.clock.Now().UnixMilli()
	if req.IntentID == "" {
		req.IntentID = intents.NewIDAt(now)
	}
	req.CreatedAt = schemas.Ptr(now)
	if req.Traceparent == nil {
		if tp := r.Header.Get("Traceparent"); tp != "" {
			req.Traceparent = &tp
		}
	}
	if err := intents.Validate(req); err != nil {
		var fe *intents.FieldError
		if errors.As(err, &fe) {
			writeError(w, http.StatusBadRequest, codeInvalidIntent, fe.Reason, fe.Field)
		} else {
			writeError(w, http.StatusBadRequest, codeInvalidIntent, err.Error(), "")
		}
		return
	}
	if !s.checkPayload(w, req) {
		return
	}
	defer s.startIntake(r, req, now).end() // tracing.go

	publish := true
	finished := func() {}
	if id, finish, ok := s.claimIdempotency(w, r, key, req, explicitID, fp); !ok {
		return
	} else if finish == nil {
		req.IntentID, publish = id, false // a repeat: the first request published it
		s.front.repeats.Inc()
		w.Header().Set("Idempotent-Replayed", "true")
	} else {
		finished = sync.OnceFunc(func() { finish(publish) }) // publish is false if it failed
		defer finished()
	}
	if publish {
		if ref := s.admit(r.Context(), req, explicitID); ref != nil {
			publish = false // nothing was: a retry with the same key publishes
			writeRefusal(w, ref)
			return
		}
	}

	// With ?wait, register the waiter before publishing, so that however
	// fast the result comes back it finds us. The intent is the request's
	// tenant's (the credential's, with authentication on).
	ik := intentKey{deref(req.Tenant), req.IntentID}
	var (
		res *schemas.IntentResult
		wt  *waiter
	)
	if wait > 0 {
		res, wt = s.results.await(ik)
		defer s.results.release(wt)
		if res == nil && explicitID { // resolved before, maybe on another instance
			res = s.lookup.stored(r.Context(), ik.tenant, req.IntentID)
		}
		if res == nil { // this caller waits: it takes a slot, or is refused
			release := s.takeWaitSlot(w, p, int64(len(req.Payload)))
			if release == nil {
				publish = false // nothing was: a retry with the same key publishes
				return
			}
			defer release()
		}
	}
	var watch *Watch // ?stream=sse (sse.go): registered before publishing, too
	if stream {
		if refuse := s.admitStream(p); refuse != nil {
			publish = false // nothing was: a retry with the same key publishes
			refuse(w)
			return
		}
		defer s.releaseStream(p)
		release := s.takeWaitSlot(w, p, int64(len(req.Payload)))
		if release == nil {
			publish = false
			return
		}
		defer release()
		watch = s.results.Watch(tenantPtr(p), req.IntentID, s.watchLimit())
		defer watch.Close()
	}
	if publish {
		if err := s.pub.PublishIntent(r.Context(), req); err != nil {
			publish = false
			s.log.LogAttrs(r.Context(), slog.LevelWarn, "publish intent failed",
				slog.String("intent_id", req.IntentID), slog.String("intent_type", req.IntentType),
				slog.String("trace_id", telemetry.TraceID(req.Traceparent)), slog.Any("error", err))
			writeError(w, http.StatusServiceUnavailable, codeUnavailable,
				"the intent could not be published; retry with the same intent_id", "")
			return
		}
	}
	s.results.submitted(ik, req.IntentType)
	location := "/v1/intents/" + url.PathEscape(req.IntentID)
	if watch != nil {
		finished() // repeats need not wait for the stream to end
		w.Header().Set("Location", location)
		s.streamEvents(w, r, watch, req.IntentID, sseFrom{}, &accepted{IntentID: req.IntentID, Status: "accepted"})
		return
	}
	if wait <= 0 {
		w.Header().Set("Location", location)
		writeJSON(w, http.StatusAccepted, accepted{IntentID: req.IntentID})
		return
	}
	if res == nil {
		res = s.waitFor(r.Context(), wt, wait)
	}
	if res == nil {
		w.Header().Set("Location", location)
		writeJSON(w, http.StatusAccepted, accepted{IntentID: req.IntentID, Status: "pending"})
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// admit asks admission about req before anything is published; a refusal
// it returns is counted. A repeat of an intent that already has a result
// (the same tenant's, in memory or the lookup store) is admitted: its
// caller gets that result, and the router drops the duplicate.
func (s *Server) admit(ctx context.Context, req *schemas.IntentRequest, explicitID bool) *Refusal {
	if s.admission == nil {
		return nil
	}
	t, known := s.catalog.Load().IntentType(req.IntentType)
	ref := s.admission.Check(t, known, req.TimeoutMs)
	if ref == nil {
		return nil
	}
	if explicitID {
		if st, err := s.lookup.Lookup(ctx, deref(req.Tenant), req.IntentID); err == nil && st.Resolved() {
			return nil
		}
	}
	s.admission.Refused(ref)
	return ref
}

// takeWaitSlot takes a slot of the wait limit for a caller of p's tenant
// whose request holds size bytes while it waits (its intent's payload;
// waiting.go), or answers its refusal (503 overloaded, reason "waiting")
// and returns nil. The caller releases the slot when it stops waiting.
func (s *Server) takeWaitSlot(w http.ResponseWriter, p *principal, size int64) (release func()) {
	release, ref := s.waitLimit.Acquire(tenantPtr(p), size)
	if ref != nil {
		writeRefusal(w, ref)
		return nil
	}
	return release
}

// waitFor waits on the injected clock for wt's result, at most d, and no
// longer than the request lives or the server runs. It returns nil if the
// result did not come.
func (s *Server) waitFor(ctx context.Context, wt *waiter, d time.Duration) *schemas.IntentResult {
	ctx, cancel := clockwork.WithTimeout(ctx, s.clock, d)
	defer cancel()
	stop := context.AfterFunc(s.stopCtx, cancel)
	defer stop()
	select {
	case res := <-wt.c:
		return res
	case <-ctx.Done():
		select { // a result that landed at the same moment wins
		case res := <-wt.c:
			return res
		default:
			return nil
		}
	}
}

// parseWait reads ?wait: absent means do not wait; otherwise a Go duration,
// not negative, capped at max.
func parseWait(q url.Values, max time.Duration) (time.Duration, error) {
	if !q.Has("wait") {
		return 0, nil
	}
	v := q.Get("wait")
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("wait=%q is not a duration such as 5s or 1500ms", v)
	}
	if d < 0 {
		return 0, fmt.Errorf("wait=%q is negative", v)
	}
	return min(d, max), nil
}

// decodeIntent reads the body as one JSON object with the fields of an
// IntentRequest. On failure it has answered and returns false.
func (s *Server) decodeIntent(w http.ResponseWriter, r *http.Request) (*schemas.IntentRequest, bool) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		if !s.writeBodyError(w, err) {
			writeError(w, http.StatusBadRequest, codeInvalidJSON, "the body could not be read: "+err.Error(), "")
		}
		return nil, false
	}
	if !utf8.Valid(raw) {
		// encoding/json would read each bad sequence as U+FFFD, so two
		// distinct ids would become one.
		field, code := invalidUTF8Field(raw), codeInvalidIntent
		if field == "" {
			code = codeInvalidJSON
		}
		writeError(w, http.StatusBadRequest, code, "must be valid UTF-8 (JSON text is)", field)
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var req schemas.IntentRequest
	err = dec.Decode(&req)
	if err == nil {
		if _, terr := dec.Token(); !errors.Is(terr, io.EOF) {
			err = errTrailingData
			var mbe *http.MaxBytesError
			if errors.As(terr, &mbe) || errors.Is(terr, errBodyTimeout) {
				err = terr
			}
		}
	}
	if err == nil {
		return &req, true
	}
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
	)
	switch {
	case s.writeBodyError(w, err):
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, codeInvalidJSON, "the body is empty: expected a JSON object with the intent's fields", "")
	case errors.As(err, &syn), errors.Is(err, io.ErrUnexpectedEOF):
		writeError(w, http.StatusBadRequest, codeInvalidJSON, "the body is not valid JSON: "+err.Error(), "")
	case errors.As(err, &typ) && typ.Field != "":
		writeError(w, http.StatusBadRequest, codeInvalidIntent,
			fmt.Sprintf("must be a JSON %s, not %s", jsonKind(typ), typ.Value), typ.Field)
	case errors.As(err, &typ):
		writeError(w, http.StatusBadRequest, codeInvalidJSON, "the body must be a JSON object with the intent's fields", "")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		writeError(w, http.StatusBadRequest, codeInvalidIntent, "unknown field", field)
	default:
		writeError(w, http.StatusBadRequest, codeInvalidJSON, err.Error(), "")
	}
	return nil, false
}

var errTrailingData = errors.New("the body must hold exactly one JSON object")

// invalidUTF8Field names the first top-level field (in name order) of a JSON
// object whose value is not valid UTF-8, or "" if none is (the bad bytes
// are in a name, or raw is not an object).
func invalidUTF8Field(raw []byte) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !utf8.Valid(m[k]) && utf8.ValidString(k) {
			return k
		}
	}
	return ""
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(e *json.UnmarshalTypeError) string {
	t := e.Type
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	default:
		return t.String()
	}
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, statusBody{Status: "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if s.stopCtx.Err() != nil {
		writeError(w, http.StatusServiceUnavailable, codeNotReady, "shutting down", "")
		return
	}
	if err := s.readiness(); err != nil {
		writeError(w, http.StatusServiceUnavailable, codeNotReady, err.Error(), "")
		return
	}
	writeJSON(w, http.StatusOK, statusBody{Status: "ready", Degraded: s.degraded()})
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, codeNotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path), "")
}

// methodNotAllowed answers 405 with an Allow header. (chi's own 405 handler
// sets Allow, but a custom one is not told the methods, so ask the router.)
func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
		if s.router.Match(chi.NewRouteContext(), m, r.URL.Path) {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
	}
	writeError(w, http.StatusMethodNotAllowed, codeMethodNotAllowed,
		fmt.Sprintf("%s is not allowed on %s", r.Method, r.URL.Path), "")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
