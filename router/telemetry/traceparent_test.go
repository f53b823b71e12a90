package telemetry_test

import (
	"testing"

	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/telemetry"
)

func TestTraceparentRoundTrip(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc, ok := telemetry.Parse(tp)
	if !ok || !sc.IsSampled() || !sc.IsRemote() {
		t.Fatalf("Parse(%q) = %v, %v", tp, sc, ok)
	}
	if got := telemetry.Format(sc); got != tp {
		t.Errorf("Format = %q, want %q", got, tp)
	}
	s := tp
	if id := telemetry.TraceID(&s); id != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("TraceID = %q", id)
	}
	unsampled := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
	if sc, ok := telemetry.Parse(unsampled); !ok || sc.IsSampled() || telemetry.Format(sc) != unsampled {
		t.Errorf("unsampled: %v %v", sc, ok)
	}
	for _, bad := range []string{
		"", "garbage",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // unknown version
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // zero span id
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  // upper case
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x",  // flags
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // separator
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-", // long
	} {
		if _, ok := telemetry.Parse(bad); ok {
			t.Errorf("Parse(%q) accepted", bad)
		}
		b := bad
		if id := telemetry.TraceID(&b); id != "" {
			t.Errorf("TraceID(%q) = %q", bad, id)
		}
	}
	if telemetry.TraceID(nil) != "" {
		t.Error("TraceID(nil)")
	}
}

func TestNewIsNilWhenOff(t *testing.T) {
	p, err := telemetry.New(config.Traces{})
	if p != nil || err != nil {
		t.Fatalf("New without an endpoint = %v, %v; want nil, nil", p, err)
	}
}
