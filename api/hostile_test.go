package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/gorilla/websocket"
)

// Finding 9: invalid UTF-8 in an id field is refused, naming the field,
// rather than read as U+FFFD (two distinct ids would collapse into one).
func TestInvalidUTF8IsRefusedNamingTheField(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct{ body, field, code string }{
		{"{\"intent_id\":\"a\xff\",\"intent_type\":\"echo\",\"payload\":{}}", "intent_id", "invalid_intent"},
		{"{\"intent_id\":\"a\xfe\",\"intent_type\":\"echo\",\"payload\":{}}", "intent_id", "invalid_intent"},
		{"{\"intent_type\":\"echo\",\"payload\":{},\"session_id\":\"s\xc3\"}", "session_id", "invalid_intent"},
		{"{\"intent_type\":\"echo\",\"payload\":{\"k\":\"\xff\"}}", "payload", "invalid_intent"},
		{"{\"intent_type\":\"echo\",\"payload\":{},\"\xff\":1}", "", "invalid_json"},
	} {
		resp, b := h.do("POST", "/v1/intents", tc.body)
		wantError(t, resp, b, http.StatusBadRequest, tc.code, tc.field)
	}
	if n := len(h.pub.Requests()); n != 0 {
		t.Fatalf("published %d requests", n)
	}
	// U+FFFD written as such is a character like any other.
	if resp, b := h.do("POST", "/v1/intents", `{"intent_id":"a`+"\uFFFD"+`","intent_type":"echo","payload":{}}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("a valid U+FFFD: %d %s", resp.StatusCode, b)
	}
}

// Stream messages must be UTF-8 too (a subscription to a collapsed id
// would match another's), and the server's texts are not HTML-escaped.
func TestStreamRefusesInvalidUTF8AndDoesNotEscapeHTML(t *testing.T) {
	h := newHarness(t)
	c := h.dial(nil)
	c.sendText("{\"subscribe\":{\"intent_ids\":[\"a\xff\"]}}")
	if m := c.read(); m.Type != "error" || m.Error.Code != "bad_message" || !strings.Contains(m.Error.Message, "UTF-8") {
		t.Fatalf("got %+v, want a bad_message error about UTF-8", m)
	}
	c.sendText(`{"subscribe":{"intent_type":"<b>"}}`)
	_ = c.conn.SetReadDeadline(time.Now().Add(testTimeout))
	typ, raw, err := c.conn.ReadMessage()
	if err != nil || typ != websocket.TextMessage {
		t.Fatalf("read: %v", err)
	}
	if !strings.Contains(string(raw), `<b>`) || strings.Contains(string(raw), `\u003c`) {
		t.Fatalf("error message %s: want <b> as written, not HTML-escaped", raw)
	}
}

// Finding 9: a JWT whose exp, nbf or iat is out of a NumericDate's range
// (1e300, negative) is invalid_token, not token_expired or not-yet-valid.
func TestJWTOutOfRangeDatesAreInvalid(t *testing.T) {
	h := newHarness(t, withAuth(nil))
	for _, tc := range []struct {
		claim string
		v     any
	}{
		{"exp", 1e300},
		{"exp", -1.0},
		{"nbf", 1e300},
		{"nbf", -5.0},
		{"iat", 1e300},
		{"iat", "yesterday"},
	} {
		tok := sign(t, jwt.SigningMethodHS256, hsSecret, claims(h.clock.Now(), "acme", func(c jwt.MapClaims) { c[tc.claim] = tc.v }))
		resp, b := h.doWith("POST", "/v1/intents", `{"intent_type":"echo","payload":{}}`, bearer(tok))
		wantRefusal(t, resp, b, http.StatusUnauthorized, "invalid_token")
		if !strings.Contains(string(b), tc.claim) && tc.v != "yesterday" {
			t.Fatalf("%s=%v: %s does not name the claim", tc.claim, tc.v, b)
		}
	}
	// A forged token with such a date is refused for its signature first.
	forged := tamper(t, sign(t, jwt.SigningMethodHS256, hsSecret, claims(h.clock.Now(), "acme", func(c jwt.MapClaims) { c["exp"] = 1e300 })))
	resp, b := h.doWith("POST", "/v1/intents", `{"intent_type":"echo","payload":{}}`, bearer(forged))
	wantRefusal(t, resp, b, http.StatusUnauthorized, "invalid_token")
	if strings.Contains(string(b), "NumericDate") {
		t.Fatalf("a forged token's dates were judged before its signature: %s", b)
	}
}
