//go:build integration

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestKcatBlackBox runs deploy/blackbox/kcat-roundtrip.sh against
// KAFKA_BOOTSTRAP: kcat and jq, clients nobody here wrote, publish an intent,
// play the agent and read the result through a real 'switchboard serve'.
func TestKcatBlackBox(t *testing.T) {
	bootstrap := apacheKafka(t)
	for _, tool := range []string{"kcat", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (apt-get install %s): the black-box test needs it", tool, tool)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "switchboard")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(ctx, "bash", "../../deploy/blackbox/kcat-roundtrip.sh")
	cmd.Env = append(os.Environ(), "KAFKA_BOOTSTRAP="+bootstrap, "SWITCHBOARD="+bin)
	out, err := cmd.CombinedOutput()
	t.Logf("\n%s", out)
	if err != nil {
		t.Fatalf("kcat round trip: %v", err)
	}
}
