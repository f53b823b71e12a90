package kafkaio

import (
	"errors"
	"fmt"
	"strings"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/config"
)

// ErrOffsetOutOfRange is returned by Read from FromOffsets when a start
// offset is no longer held by the broker (retention deleted it).
var ErrOffsetOutOfRange = errors.New("kafkaio: offset out of range")

// ErrReading is returned by Read when its Reading asks for what it cannot
// do (a Group reading from anywhere but the beginning, or not forever).
var ErrReading = errors.New("kafkaio: a reading Read cannot do")

// ErrTransactionStuck is returned when a transactional call into librdkafka
// did not return within its deadline and a grace period after it (librdkafka#5456,
// #5511). The router's TxSink abandons that producer and opens new ones.
var ErrTransactionStuck = errors.New("kafkaio: a transactional call did not return")

// What a broker's refusal of a client means. Errors that wrap them are
// *RefusedError, whose message is the one line a command prints.
var (
	// ErrAuthentication: the brokers refused the client's SASL credentials
	// (a wrong password, an unknown user, a mechanism the listener does not
	// enable).
	ErrAuthentication = errors.New("kafkaio: the brokers refused the credentials")
	// ErrUntrustedCertificate: the broker's TLS certificate did not verify
	// against ssl.ca.location (or the system's CAs when it is not set).
	ErrUntrustedCertificate = errors.New("kafkaio: the broker's TLS certificate is not trusted")
	// ErrNotAuthorized: the broker denied an operation to the client's
	// principal: it has no ACL for it.
	ErrNotAuthorized = errors.New("kafkaio: not authorized")
)

// RefusedError is a broker's refusal of a client: of its credentials, of
// its TLS handshake, or of an operation its principal has no ACL for. It
// wraps Kind (one of the sentinels above) and the client's own error, if
// any.
type RefusedError struct {
	Kind      error
	Principal string // "User:<sasl.username>", or how the principal is known
	Operation string // ErrNotAuthorized: Read, Write, Describe, Create
	Resource  string // ErrNotAuthorized: "topic t", "group g", "transactional id x", "the cluster"
	Broker    string // the broker that said so, when librdkafka names it
	Detail    string // the broker's or the TLS library's words
	Hint      string // the setting to check
	Err       error
}

func (e *RefusedError) Error() string {
	var b strings.Builder
	b.WriteString("kafkaio: ")
	switch e.Kind {
	case ErrAuthentication:
		fmt.Fprintf(&b, "the brokers refused the SASL credentials of %s", e.Principal)
	case ErrUntrustedCertificate:
		b.WriteString("the TLS certificate of broker ")
		if e.Broker != "" {
			b.WriteString(e.Broker + " ")
		}
		b.WriteString("is not trusted")
	case ErrNotAuthorized:
		fmt.Fprintf(&b, "not authorized: the broker denied %s %s on %s", e.Principal, e.Operation, e.Resource)
	default:
		b.WriteString("refused")
	}
	if e.Detail != "" {
		fmt.Fprintf(&b, " (%s)", e.Detail)
	}
	if e.Hint != "" {
		b.WriteString(": " + e.Hint)
	}
	return b.String()
}

// Unwrap lets errors.Is find the kind and the client's error.
func (e *RefusedError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// refusedOr returns err itself when it is a *RefusedError (its line says it
// all), else err wrapped by format, whose last verb is %w.
func refusedOr(err error, format string, args ...any) error {
	var r *RefusedError
	if errors.As(err, &r) {
		return r
	}
	return fmt.Errorf(format, append(args, err)...)
}

// principal is how the broker knows these settings' client, as far as the
// settings say: User:<sasl.username>, or its certificate's subject.
func (s Settings) principal() string {
	if u := s.Properties["sasl.username"]; u != "" {
		return "User:" + u
	}
	switch strings.ToUpper(s.Properties["security.protocol"]) {
	case "SSL":
		return "the principal of this client's certificate"
	case "SASL_SSL", "SASL_PLAINTEXT":
		return "this client's principal"
	}
	return "User:ANONYMOUS"
}

// refusalIn reads a librdkafka error text (of an error event or a log
// line) and returns the refusal it reports, or nil: the brokers refusing
// the credentials, or a certificate that did not verify.
//
//	sasl_ssl://127.0.0.1:9092/bootstrap: SASL authentication error: Authentication failed ... (after 323ms in state AUTH_REQ)
//	sasl_ssl://127.0.0.1:9092/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker certificate could not be verified, ... (after 7ms in state SSL_HANDSHAKE)
func (s Settings) refusalIn(text string) *RefusedError {
	if i := strings.Index(text, "]: "); strings.HasPrefix(text, "[thrd:") && i > 0 {
		text = text[i+3:]
	}
	broker := ""
	if i := strings.Index(text, "://"); i >= 0 {
		if k := strings.IndexByte(text[i+3:], '/'); k > 0 {
			broker = text[i+3 : i+3+k]
		}
	}
	words := func(after string) string {
		i := strings.Index(text, after)
		if i < 0 {
			return ""
		}
		d := text[i+len(after):]
		if j := strings.Index(d, " (after "); j >= 0 {
			d = d[:j]
		}
		return strings.TrimSpace(d)
	}
	switch {
	case strings.Contains(text, "SASL authentication error"):
		return &RefusedError{
			Kind: ErrAuthentication, Principal: s.principal(), Broker: broker, Detail: words("SASL authentication error: "),
			Hint: "check sasl.username and sasl.password in kafka.properties, or " + config.EnvSASLUsername + " and " + config.EnvSASLPassword,
		}
	case strings.Contains(text, "certificate verify failed"):
		ca := s.Properties["ssl.ca.location"]
		hint := "set kafka.properties ssl.ca.location to the PEM file of the CA that signed the brokers' certificates (it is not set: the system's CAs were used)"
		if ca != "" {
			hint = "ssl.ca.location (" + ca + ") is not the CA that signed the brokers' certificates"
		}
		return &RefusedError{Kind: ErrUntrustedCertificate, Principal: s.principal(), Broker: broker, Detail: "certificate verify failed", Hint: hint}
	}
	return nil
}

// refusal classifies an error a client returned or reported: a refusal of
// the credentials or the certificate, else, for the broker's authorization
// codes, a denial of operation on resource ("topic t"); anything else comes
// back unchanged.
func (s Settings) refusal(err error, operation, resource string) error {
	var kerr kafka.Error
	if err == nil || !errors.As(err, &kerr) {
		return err
	}
	switch kerr.Code() {
	case kafka.ErrAuthentication, kafka.ErrSaslAuthenticationFailed, kafka.ErrSsl:
		if r := s.refusalIn(kerr.Error()); r != nil {
			r.Err = err
			return r
		}
	case kafka.ErrTopicAuthorizationFailed:
		return s.denied(err, operation, resource, "topic")
	case kafka.ErrGroupAuthorizationFailed:
		return s.denied(err, "Read", resource, "group")
	case kafka.ErrTransactionalIDAuthorizationFailed:
		return s.denied(err, "Write", resource, "transactional id")
	case kafka.ErrClusterAuthorizationFailed:
		return s.denied(err, operation, "the cluster", "")
	}
	return err
}

// denied builds the ErrNotAuthorized error for err. resource names what the
// caller was doing it on ("topic t", "group g"); when it is not of the kind
// the broker named (a consumer denied its group while reading a topic), the
// kind stands alone.
func (s Settings) denied(err error, operation, resource, kind string) error {
	if kind != "" && !strings.HasPrefix(resource, kind+" ") {
		resource = "its " + kind
	}
	if operation == "" {
		operation = "an operation"
	}
	var kerr kafka.Error
	detail := err.Error()
	if errors.As(err, &kerr) {
		detail = strings.TrimPrefix(kerr.Code().String(), "Broker: ")
	}
	return &RefusedError{
		Kind: ErrNotAuthorized, Principal: s.principal(), Operation: operation, Resource: resource, Detail: detail,
		Hint: "it needs an ACL for that ('switchboard topics acls --print' lists what each principal needs)", Err: err,
	}
}
