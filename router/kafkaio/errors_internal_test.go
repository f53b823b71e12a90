package kafkaio

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// The texts below are librdkafka 2.11's, as logged against the SASL_SSL
// cluster of deploy/kafka/kafka.sh cluster up --secure.
const (
	logWrongPassword = "[thrd:sasl_ssl://127.0.0.1:65092/bootstrap]: sasl_ssl://127.0.0.1:65092/bootstrap: SASL authentication error: " +
		"Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 (after 323ms in state AUTH_REQ)"
	eventUntrusted = "sasl_ssl://127.0.0.1:65094/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: " +
		"broker certificate could not be verified, verify that ssl.ca.location is correctly configured or root CA certificates are installed " +
		"(install ca-certificates package) (after 7ms in state SSL_HANDSHAKE)"
)

func TestRefusalsReadFromLibrdkafkaText(t *testing.T) {
	s := Settings{Bootstrap: "b:1", Properties: map[string]string{"sasl.username": "router", "ssl.ca.location": "/etc/kafka/ca.pem"}}
	for _, c := range []struct {
		text string
		kind error
		want string
	}{
		{logWrongPassword, ErrAuthentication, `kafkaio: the brokers refused the SASL credentials of User:router ` +
			`(Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512): ` +
			`check sasl.username and sasl.password in kafka.properties, or SWITCHBOARD_KAFKA_SASL_USERNAME and SWITCHBOARD_KAFKA_SASL_PASSWORD`},
		{eventUntrusted, ErrUntrustedCertificate, `kafkaio: the TLS certificate of broker 127.0.0.1:65094 is not trusted (certificate verify failed): ` +
			`ssl.ca.location (/etc/kafka/ca.pem) is not the CA that signed the brokers' certificates`},
	} {
		r := s.refusalIn(c.text)
		if r == nil {
			t.Fatalf("no refusal read from %q", c.text)
		}
		if !errors.Is(r, c.kind) {
			t.Errorf("%q: kind %v, want %v", c.text, r.Kind, c.kind)
		}
		if r.Error() != c.want {
			t.Errorf("message\n got %s\nwant %s", r.Error(), c.want)
		}
	}
	for _, other := range []string{
		"[thrd:127.0.0.1:9092/bootstrap]: 127.0.0.1:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed: Connection refused (after 0ms in state CONNECT)",
		"sasl_ssl://127.0.0.1:65092/1: Disconnected (after 41236ms in state UP)",
	} {
		if r := s.refusalIn(other); r != nil {
			t.Errorf("%q read as a refusal: %v", other, r)
		}
	}
}

func TestUntrustedWithoutCALocationSaysSo(t *testing.T) {
	r := Settings{Properties: map[string]string{"security.protocol": "SSL"}}.refusalIn(eventUntrusted)
	want := "kafkaio: the TLS certificate of broker 127.0.0.1:65094 is not trusted (certificate verify failed): set kafka.properties ssl.ca.location " +
		"to the PEM file of the CA that signed the brokers' certificates (it is not set: the system's CAs were used)"
	if r == nil || r.Error() != want {
		t.Fatalf("got %v\nwant %s", r, want)
	}
}

func TestDenialsNameThePrincipalTheOperationAndTheResource(t *testing.T) {
	s := Settings{Properties: map[string]string{"sasl.username": "agent-echo"}}
	hint := ": it needs an ACL for that ('switchboard topics acls --print' lists what each principal needs)"
	for _, c := range []struct {
		code      kafka.ErrorCode
		op, res   string
		wantWhole string
	}{
		{
			kafka.ErrTopicAuthorizationFailed, "Write", "topic mcp.intent.result",
			"kafkaio: not authorized: the broker denied User:agent-echo Write on topic mcp.intent.result (Topic authorization failed)",
		},
		{
			kafka.ErrGroupAuthorizationFailed, "Read", "group switchboard-agent-other",
			"kafkaio: not authorized: the broker denied User:agent-echo Read on group switchboard-agent-other (Group authorization failed)",
		},
		// A group denied while reading a topic: the resource named is the group.
		{kafka.ErrGroupAuthorizationFailed, "Read", "topic t", "kafkaio: not authorized: the broker denied User:agent-echo Read on its group (Group authorization failed)"},
		{
			kafka.ErrTransactionalIDAuthorizationFailed, "Write", "transactional id g.r1",
			"kafkaio: not authorized: the broker denied User:agent-echo Write on transactional id g.r1 (Transactional Id authorization failed)",
		},
		{kafka.ErrClusterAuthorizationFailed, "Create", "topic t", "kafkaio: not authorized: the broker denied User:agent-echo Create on the cluster (Cluster authorization failed)"},
	} {
		err := s.refusal(kafka.NewError(c.code, "from the broker", false), c.op, c.res)
		if !errors.Is(err, ErrNotAuthorized) {
			t.Fatalf("%v: %v is not ErrNotAuthorized", c.code, err)
		}
		var kerr kafka.Error
		if !errors.As(err, &kerr) || kerr.Code() != c.code {
			t.Errorf("%v: the client's error is not kept (errors.As: %v)", c.code, kerr)
		}
		if err.Error() != c.wantWhole+hint {
			t.Errorf("message\n got %s\nwant %s", err, c.wantWhole+hint)
		}
	}
	other := kafka.NewError(kafka.ErrMsgTimedOut, "timed out", false)
	if err := s.refusal(other, "Write", "topic t"); !errors.Is(err, other) || errors.Is(err, ErrNotAuthorized) {
		t.Errorf("a timeout came back as %v", err)
	}
}

func TestRefusedOrKeepsTheOneLine(t *testing.T) {
	r := &RefusedError{Kind: ErrAuthentication, Principal: "User:x"}
	if got := refusedOr(r, "kafkaio: creating topics: %w"); got != r {
		t.Errorf("a refusal was wrapped: %v", got)
	}
	plain := errors.New("boom")
	if got := refusedOr(plain, "kafkaio: creating topic %s: %w", "t"); got.Error() != "kafkaio: creating topic t: boom" || !errors.Is(got, plain) {
		t.Errorf("got %v", got)
	}
}

// What librdkafka logs and reports while a broker restarts (the chaos test's
// broker restart, librdkafka 2.11 against Kafka 4.4): none of it is a
// refusal, so the watch never ends a read or a send on it, and a consumer
// never returns it as a denial. (The chaos test's stall after issue 21's
// merge was looked for here.)
func TestBrokerRestartIsNoRefusal(t *testing.T) {
	lines := []string{
		"[thrd:GroupCoordinator]: GroupCoordinator: 127.0.0.1:25092: Connect to ipv4#127.0.0.1:25092 failed: Connection refused (after 0ms in state CONNECT)",
		"[thrd:main]: Failed to acquire transactional PID from broker TxnCoordinator/1: Broker: Not coordinator: retrying",
		"[thrd:127.0.0.1:25092/bootstrap]: 127.0.0.1:25092/1: Disconnected (after 51234ms in state UP)",
		"[thrd:main]: Failed to initialize Producer ID: Broker: Coordinator load in progress",
		"[thrd:GroupCoordinator]: GroupCoordinator/1: Timed out OffsetFetchRequest in flight (after 10003ms, timeout #0)",
		"[thrd:main]: 127.0.0.1:25092/bootstrap: 1/1 brokers are down",
		"[thrd:main]: Fatal consumer error: Broker: Static consumer fenced by other consumer with same group.instance.id",
	}
	s := Settings{Bootstrap: "127.0.0.1:25092"}
	for _, l := range lines {
		if r := s.refusalIn(l); r != nil {
			t.Errorf("%q read as a refusal: %v", l, r)
		}
	}
	logs := make(chan kafka.LogEvent, len(lines))
	for _, l := range lines {
		logs <- kafka.LogEvent{Name: "switchboard#consumer-1", Tag: "FAIL", Message: l, Level: 3}
	}
	close(logs)
	s.Logger = slog.New(slog.DiscardHandler)
	w := newWatch(s, logs)
	<-w.done
	if err := w.refusal(); err != nil {
		t.Errorf("the watch read a refusal from a broker restart: %v", err)
	}
	c := &consumer{w: w, group: "g"}
	codes := []kafka.ErrorCode{
		kafka.ErrTransport, kafka.ErrAllBrokersDown, kafka.ErrTimedOut,
		kafka.ErrCoordinatorLoadInProgress, kafka.ErrNotCoordinator, kafka.ErrFencedInstanceID,
	}
	for _, code := range codes {
		if err := c.denial(kafka.NewError(code, code.String(), false), []string{"t"}); err != nil {
			t.Errorf("%v read as a denial: %v", code, err)
		}
	}
}
