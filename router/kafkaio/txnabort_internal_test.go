package kafkaio

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/switchboard-mcp/switchboard/router/lag"
)

// TestFranzOptions: the aborter's client speaks the security the
// librdkafka properties ask for, or says in one line that it cannot.
func TestFranzOptions(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		props map[string]string
		err   string
	}{
		{nil, ""},
		{map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "u", "sasl.password": "p"}, ""},
		{map[string]string{"security.protocol": "sasl_ssl", "sasl.mechanism": "PLAIN"}, ""},
		{map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanisms": "OAUTHBEARER"}, "SASL mechanism OAUTHBEARER is not one the transaction aborter speaks"},
		{map[string]string{"security.protocol": "SASL_PLAINTEXT"}, "SASL mechanism GSSAPI"},
		{map[string]string{"security.protocol": "SSL", "ssl.ca.location": ca}, "holds no PEM certificate"},
		{map[string]string{"security.protocol": "SSL", "ssl.ca.location": ca + ".missing"}, "ssl.ca.location"},
		{map[string]string{"security.protocol": "QUIC"}, `security.protocol "QUIC"`},
	} {
		_, err := franzOptions(Settings{Bootstrap: "127.0.0.1:1", Properties: tc.props})
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%v: err %v, want %q", tc.props, err, tc.err)
		}
	}
	if _, err := franzOptions(Settings{}); err == nil {
		t.Error("no bootstrap servers was accepted")
	}
}

func TestRefusalIsErrAbortRefused(t *testing.T) {
	if err := refusal(kerr.ClusterAuthorizationFailed); !errors.Is(err, lag.ErrAbortRefused) || !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("refusal(CLUSTER_AUTHORIZATION_FAILED) = %v, want ErrAbortRefused wrapping it", err)
	}
	if err := refusal(fmt.Errorf("x: %w", kerr.NotLeaderForPartition)); errors.Is(err, lag.ErrAbortRefused) {
		t.Errorf("refusal(NOT_LEADER) = %v, want no ErrAbortRefused (retried)", err)
	}
}
