package intents_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/schemas"
)

func valid() *schemas.IntentRequest {
	return &schemas.IntentRequest{IntentID: "i-1", IntentType: "fraud_check", Payload: `{"amount":12}`}
}

func TestValidateNamesTheField(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(r *schemas.IntentRequest)
		field string
	}{
		{"missing id", func(r *schemas.IntentRequest) { r.IntentID = "" }, "intent_id"},
		{"id with space", func(r *schemas.IntentRequest) { r.IntentID = "a b" }, "intent_id"},
		{"long id", func(r *schemas.IntentRequest) { r.IntentID = strings.Repeat("x", 129) }, "intent_id"},
		{"missing type", func(r *schemas.IntentRequest) { r.IntentType = "" }, "intent_type"},
		{"upper-case type", func(r *schemas.IntentRequest) { r.IntentType = "Fraud" }, "intent_type"},
		{"missing payload", func(r *schemas.IntentRequest) { r.Payload = "" }, "payload"},
		{"bad payload", func(r *schemas.IntentRequest) { r.Payload = `{"a":` }, "payload"},
		{"zero timeout", func(r *schemas.IntentRequest) { r.TimeoutMs = schemas.Ptr(int64(0)) }, "timeout_ms"},
		{"huge timeout", func(r *schemas.IntentRequest) { r.TimeoutMs = schemas.Ptr(int64(intents.MaxTimeoutMs + 1)) }, "timeout_ms"},
		{"empty session", func(r *schemas.IntentRequest) { r.SessionID = schemas.Ptr("") }, "session_id"},
		{"control char in tenant", func(r *schemas.IntentRequest) { r.Tenant = schemas.Ptr("a\x01") }, "tenant"},
		{"negative created_at", func(r *schemas.IntentRequest) { r.CreatedAt = schemas.Ptr(int64(-1)) }, "created_at"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := valid()
			tc.edit(r)
			err := intents.Validate(r)
			var fe *intents.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate = %v, want a *FieldError", err)
			}
			if fe.Field != tc.field {
				t.Fatalf("field = %q, want %q (%v)", fe.Field, tc.field, err)
			}
			if !errors.Is(err, intents.ErrInvalid) {
				t.Fatalf("errors.Is(err, ErrInvalid) = false")
			}
		})
	}
	if err := intents.Validate(valid()); err != nil {
		t.Fatalf("valid request rejected: %v", err)
	}
	if err := intents.Validate(nil); err == nil {
		t.Fatal("nil request accepted")
	}
}

func TestDeadlineClampsAndStartsFromTheRecord(t *testing.T) {
	p := intents.TimeoutPolicy{Default: 2 * time.Second, Min: 100 * time.Millisecond, Max: 5 * time.Second}
	cases := []struct {
		ask  *int64
		want int64
	}{
		{nil, 1000 + 2000},
		{schemas.Ptr(int64(300)), 1000 + 300},
		{schemas.Ptr(int64(10)), 1000 + 100},
		{schemas.Ptr(int64(60000)), 1000 + 5000},
	}
	for _, tc := range cases {
		if got := intents.Deadline(1000, tc.ask, p); got != tc.want {
			t.Errorf("Deadline(1000, %v) = %d, want %d", tc.ask, got, tc.want)
		}
	}
	if got := intents.Deadline(1000, schemas.Ptr(int64(60000)), intents.TimeoutPolicy{Default: time.Second}); got != 61000 {
		t.Errorf("unbounded policy: got %d", got)
	}
}

func TestNewIDIsAVersion7UUIDOrderedByTime(t *testing.T) {
	a, b := intents.NewIDAt(1_700_000_000_000), intents.NewIDAt(1_700_000_000_001)
	if len(a) != 36 || a[14] != '7' || !strings.ContainsAny(a[19:20], "89ab") {
		t.Fatalf("not a v7 UUID: %s", a)
	}
	if a >= b {
		t.Fatalf("ids not ordered by time: %s >= %s", a, b)
	}
	if a, b := intents.NewID(), intents.NewID(); a == b {
		t.Fatal("two ids are equal")
	}
	if err := intents.Validate(&schemas.IntentRequest{IntentID: intents.NewID(), IntentType: "echo", Payload: "{}"}); err != nil {
		t.Fatal(err)
	}
}

func TestValidName(t *testing.T) {
	for s, want := range map[string]bool{"echo": true, "fraud_check": true, "summarize.v2": true, "a-b": true, "": false, "9x": false, "Echo": false, "a b": false, strings.Repeat("a", 65): false} {
		if intents.ValidName(s) != want {
			t.Errorf("ValidName(%q) = %v", s, !want)
		}
	}
}

func TestCancelRoundTrip(t *testing.T) {
	id := intents.NewID()
	v, err := intents.MarshalCancel(intents.Cancel{IntentID: id, Reason: "user left"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := intents.UnmarshalCancel([]byte("other"), v)
	if err != nil || c.IntentID != id || c.Reason != "user left" {
		t.Fatalf("got %+v, %v", c, err)
	}
	if c, err := intents.UnmarshalCancel([]byte(id), nil); err != nil || c.IntentID != id {
		t.Fatalf("key-only cancel: got %+v, %v", c, err)
	}
	if _, err := intents.UnmarshalCancel([]byte("x y"), nil); err == nil {
		t.Fatal("a cancel without a valid id was accepted")
	}
	if _, err := intents.UnmarshalCancel(nil, []byte("{")); err == nil {
		t.Fatal("a malformed cancel was accepted")
	}
}

// A cancel names (tenant, intent_id); text that decoding would turn into
// U+FFFD, or a tenant no intent can have, makes it unreadable rather than
// a cancel of another intent.
func TestCancelTenantAndText(t *testing.T) {
	v, err := intents.MarshalCancel(intents.Cancel{IntentID: "i-1", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := intents.UnmarshalCancel(nil, v); err != nil || c.Tenant != "acme" || c.IntentID != "i-1" {
		t.Fatalf("got %+v, %v", c, err)
	}
	for _, bad := range []string{
		"{\"intent_id\":\"i-\xff\"}",
		`{"intent_id":"i-\udc01"}`,
		`{"intent_id":"i-1","tenant":"a b"}`,
		"{\"intent_id\":\"i-1\",\"tenant\":\"a\x1fb\"}",
	} {
		if c, err := intents.UnmarshalCancel(nil, []byte(bad)); err == nil {
			t.Errorf("%q read as %+v", bad, c)
		}
	}
	if _, err := intents.MarshalCancel(intents.Cancel{IntentID: "i-1", Tenant: "a b"}); err == nil {
		t.Error("a cancel with an invalid tenant was written")
	}
}

// Scoped names (tenant, id) in one string that no other pair, and no bare
// id, gives: tenants and ids never hold the separator.
func TestScopedKeysDoNotAlias(t *testing.T) {
	pairs := [][2]string{{"", "a/b"}, {"a", "b"}, {"a/b", "c"}, {"a", "b/c"}, {"", "a"}, {"ab", ""}}
	seen := map[string][2]string{}
	for _, p := range pairs {
		k := intents.Scoped(p[0], p[1])
		if other, dup := seen[k]; dup {
			t.Fatalf("%q and %q share the key %q", p, other, k)
		}
		seen[k] = p
		if tenant, id := intents.SplitScoped(k); tenant != p[0] || id != p[1] {
			t.Fatalf("SplitScoped(%q) = %q, %q; want %q", k, tenant, id, p)
		}
	}
	if intents.ValidID("a"+intents.TenantSeparator+"b") || intents.ValidLabel("a"+intents.TenantSeparator) {
		t.Fatal("an id or a tenant may hold the separator")
	}
}
