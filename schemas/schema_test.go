package schemas

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
)

// goSymbols lists each enum's Go constants, in schema order.
var goSymbols = map[string][]string{
	"Status":        {string(StatusOK), string(StatusError), string(StatusProgress), string(StatusUnknown)},
	"TimeoutReason": {string(ReasonDeadline), string(ReasonIdle), string(ReasonExpiredOnArrival), string(ReasonCircuitOpen), string(ReasonShed), string(ReasonUnknown)},
	"FallbackKind":  {string(FallbackNone), string(FallbackCache), string(FallbackStatic), string(FallbackUnknown)},
	"Outcome": {
		string(OutcomeAnswered), string(OutcomeFallbackCache), string(OutcomeFallbackStatic), string(OutcomeTimedOut),
		string(OutcomeRejected), string(OutcomeAgentError), string(OutcomeCancelled), string(OutcomeShed),
		string(OutcomeCircuitOpen), string(OutcomeUnknown),
	},
}

// validSymbol is the codec's own idea of each enum.
var validSymbol = map[string]func(string) bool{
	"Status":        func(s string) bool { return validStatus(Status(s)) },
	"TimeoutReason": func(s string) bool { return validReason(TimeoutReason(s)) },
	"FallbackKind":  func(s string) bool { return validFallback(FallbackKind(s)) },
	"Outcome":       func(s string) bool { return validOutcome(Outcome(s)) },
}

// TestEmbeddedSchemas checks every .avsc against its Go type: field names and
// order as the avro tags, pointers as ["null", T] unions defaulting to null,
// enums with an "unknown" default and the Go constants as symbols, docs
// everywhere.
func TestEmbeddedSchemas(t *testing.T) {
	parsed, err := recordSchemas()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range allKinds {
		rs := parsed[r.kind()]
		t.Run(rs.name, func(t *testing.T) {
			if rs.name != SchemaName(r) || !strings.HasPrefix(rs.name, "mcp.switchboard.") {
				t.Errorf("name %q, SchemaName %q", rs.name, SchemaName(r))
			}
			if AvroSchema(r) != rs.text {
				t.Error("AvroSchema differs from the parsed text")
			}
			compareRecord(t, rs.schema.(*avro.RecordSchema), reflect.TypeOf(r).Elem())
		})
	}
}

func compareRecord(t *testing.T, rs *avro.RecordSchema, typ reflect.Type) {
	t.Helper()
	if rs.Name() != typ.Name() {
		t.Errorf("record %s for Go type %s", rs.Name(), typ.Name())
	}
	if rs.Doc() == "" {
		t.Errorf("record %s has no doc", rs.Name())
	}
	fields := rs.Fields()
	if len(fields) != typ.NumField() {
		t.Fatalf("%s: %d schema fields, %d Go fields", rs.Name(), len(fields), typ.NumField())
	}
	for i, f := range fields {
		gf := typ.Field(i)
		if tag := gf.Tag.Get("avro"); tag != f.Name() {
			t.Errorf("%s field %d: schema %q, Go tag %q", rs.Name(), i, f.Name(), tag)
		}
		if jsonName, _, _ := strings.Cut(gf.Tag.Get("json"), ","); jsonName != f.Name() {
			t.Errorf("%s.%s: json tag %q", rs.Name(), f.Name(), jsonName)
		}
		if f.Doc() == "" {
			t.Errorf("%s.%s has no doc", rs.Name(), f.Name())
		}
		ft, st := gf.Type, f.Type()
		if ft.Kind() == reflect.Pointer {
			u, ok := st.(*avro.UnionSchema)
			if !ok || len(u.Types()) != 2 || u.Types()[0].Type() != avro.Null {
				t.Errorf("%s.%s: optional Go field, schema %s", rs.Name(), f.Name(), st)
				continue
			}
			if !f.HasDefault() || f.Default() != nil {
				t.Errorf("%s.%s: optional field without default null", rs.Name(), f.Name())
			}
			ft, st = ft.Elem(), u.Types()[1]
		} else if f.HasDefault() {
			t.Errorf("%s.%s: required field with a default", rs.Name(), f.Name())
		}
		compareType(t, rs.Name()+"."+f.Name(), st, ft)
	}
}

func compareType(t *testing.T, where string, st avro.Schema, ft reflect.Type) {
	t.Helper()
	switch s := st.(type) {
	case *avro.RecordSchema:
		compareRecord(t, s, ft)
	case *avro.EnumSchema:
		want, ok := goSymbols[ft.Name()]
		if !ok || s.Name() != ft.Name() {
			t.Errorf("%s: enum %s for Go type %s", where, s.Name(), ft)
			return
		}
		if !slices.Equal(s.Symbols(), want) {
			t.Errorf("%s: symbols %v, Go constants %v", where, s.Symbols(), want)
		}
		if s.Default() != "unknown" {
			t.Errorf("%s: enum default %q, want unknown", where, s.Default())
		}
		for _, sym := range s.Symbols() {
			if !validSymbol[s.Name()](sym) {
				t.Errorf("%s: codec rejects symbol %q", where, sym)
			}
		}
		if validSymbol[s.Name()]("no-such-symbol") || validSymbol[s.Name()]("") {
			t.Errorf("%s: codec accepts symbols the enum lacks", where)
		}
	case *avro.MapSchema:
		if ft.Kind() != reflect.Map || ft.Key().Kind() != reflect.String {
			t.Errorf("%s: map for Go type %s", where, ft)
			return
		}
		compareType(t, where+"[]", s.Values(), ft.Elem())
	case *avro.PrimitiveSchema:
		want := map[avro.Type]reflect.Kind{
			avro.String: reflect.String, avro.Long: reflect.Int64, avro.Int: reflect.Int32,
			avro.Boolean: reflect.Bool, avro.Double: reflect.Float64,
		}[s.Type()]
		if ft.Kind() != want || s.Logical() != nil {
			t.Errorf("%s: %s for Go type %s", where, s.Type(), ft)
		}
	default:
		t.Errorf("%s: unexpected schema %s", where, st.Type())
	}
}

// TestNestedCopiesAgree checks that the inline copies of ContextSnapshot and
// ErrorInfo are the same type as their other definitions, so one Go type
// serves all of them.
func TestNestedCopiesAgree(t *testing.T) {
	parsed, err := recordSchemas()
	if err != nil {
		t.Fatal(err)
	}
	field := func(k kind, name string) avro.Schema {
		for _, f := range parsed[k].schema.(*avro.RecordSchema).Fields() {
			if f.Name() == name {
				return f.Type().(*avro.UnionSchema).Types()[1]
			}
		}
		t.Fatalf("no field %s", name)
		return nil
	}
	if a, b := field(kindAgentRequest, "context").Fingerprint(), parsed[kindContextSnapshot].schema.Fingerprint(); a != b {
		t.Error("AgentRequest.context differs from ContextSnapshot")
	}
	if a, b := field(kindAgentResponse, "error").Fingerprint(), field(kindIntentResult, "error").Fingerprint(); a != b {
		t.Error("AgentResponse.error differs from IntentResult.error")
	}
}
