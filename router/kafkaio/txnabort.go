package kafkaio

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/switchboard-mcp/switchboard/router/lag"
)

// TxnAborter implements lag.TxnAborter with franz-go's client, which speaks
// the three requests it needs (DescribeProducers, ListTransactions,
// WriteTxnMarkers, KIP-664) and routes each to the partition's leader or
// to every broker; confluent-kafka-go's admin client has none of them.
// Create it with NewTxnAborter and Close it when the HangWatch has
// stopped; its methods are safe for concurrent use.
type TxnAborter struct {
	cl   *kgo.Client
	adm  *kadm.Client
	opts []kgo.Opt // to read the transaction log with a consumer of its own
	// Timeout bounds each request, and Decision's read of the log.
	Timeout time.Duration
	// Lookback is how far before a producer's last write Decision reads
	// the transaction log: several transaction timeouts.
	Lookback time.Duration
}

var _ lag.TxnAborter = (*TxnAborter)(nil)

// NewTxnAborter builds the client from s: bootstrap servers, client id,
// and the security properties librdkafka would read (security.protocol;
// sasl.mechanisms PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 with sasl.username
// and sasl.password; ssl.ca.location, ssl.certificate.location and
// ssl.key.location). Other mechanisms (GSSAPI, OAUTHBEARER) are an error:
// the caller goes on without self-repair. It connects lazily.
func NewTxnAborter(s Settings) (*TxnAborter, error) {
	opts, err := franzOptions(s)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: the transaction aborter's client: %w", err)
	}
	return &TxnAborter{
		cl: cl, adm: kadm.NewClient(cl), opts: opts, Timeout: 10 * time.Second,
		Lookback: max(2*time.Minute, 4*TransactionTimeout(s)),
	}, nil
}

// Close closes the client.
func (a *TxnAborter) Close() { a.cl.Close() }

// Producers implements lag.TxnAborter (DescribeProducers, to the leader).
func (a *TxnAborter) Producers(ctx context.Context, topic string, partition int32) ([]lag.Producer, error) {
	ctx, cancel := context.WithTimeout(ctx, a.Timeout)
	defer cancel()
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, a.cl)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: describing the producers of %s[%d]: %w", topic, partition, err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.Topic != topic || p.Partition != partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("kafkaio: describing the producers of %s[%d]: %w", topic, partition, refusal(err))
			}
			out := make([]lag.Producer, 0, len(p.ActiveProducers))
			for _, ap := range p.ActiveProducers {
				pr := lag.Producer{ID: ap.ProducerID, Epoch: int16(ap.ProducerEpoch), CoordinatorEpoch: ap.CoordinatorEpoch, TxnStart: ap.CurrentTxnStartOffset}
				if ap.LastTimestamp >= 0 {
					pr.LastWrite = time.UnixMilli(ap.LastTimestamp)
				}
				out = append(out, pr)
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("kafkaio: describing the producers of %s[%d]: no answer for the partition", topic, partition)
}

// liveTxnStates are the coordinator's states of a transaction in progress
// (its markers not all written yet).
var liveTxnStates = []string{"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"}

// Live implements lag.TxnAborter: ListTransactions filtered by producer
// id and the live states, to every broker (each coordinates some
// transactional ids), then DescribeTransactions of those ids, to their
// coordinators: live if one has the partition in the producer's
// transaction. A broker that does not answer is an error: it may
// coordinate the producer.
func (a *TxnAborter) Live(ctx context.Context, topic string, partition int32, p lag.Producer) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, a.Timeout)
	defer cancel()
	ids, err := a.listLive(ctx, p.ID)
	if err != nil || len(ids) == 0 {
		return false, err
	}
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = ids
	resp, err := req.RequestWith(ctx, a.cl)
	if err != nil {
		return false, fmt.Errorf("kafkaio: describing transactions %v: %w", ids, err)
	}
	for _, ts := range resp.TransactionStates {
		if err := kerr.ErrorForCode(ts.ErrorCode); err != nil {
			return false, fmt.Errorf("kafkaio: describing transaction %s: %w", ts.TransactionalID, err)
		}
		if ts.ProducerID != p.ID || !slices.Contains(liveTxnStates, ts.State) {
			continue
		}
		for _, t := range ts.Topics {
			if t.Topic == topic && slices.Contains(t.Partitions, partition) {
				return true, nil
			}
		}
	}
	return false, nil
}

// listLive returns the transactional ids of producer id whose coordinator
// lists them in a live state.
func (a *TxnAborter) listLive(ctx context.Context, id int64) ([]string, error) {
	return a.listTxnIDs(ctx, id, liveTxnStates)
}

// listTxnIDs returns the transactional ids of producer id whose
// coordinator lists them in one of states (nil: any).
func (a *TxnAborter) listTxnIDs(ctx context.Context, id int64, states []string) ([]string, error) {
	req := kmsg.NewPtrListTransactionsRequest()
	req.ProducerIDFilters = []int64{id}
	req.StateFilters = states
	var out []string
	for _, sh := range a.cl.RequestSharded(ctx, req) {
		if sh.Err != nil {
			return nil, fmt.Errorf("kafkaio: listing transactions on broker %d: %w", sh.Meta.NodeID, sh.Err)
		}
		resp, _ := sh.Resp.(*kmsg.ListTransactionsResponse)
		if resp == nil {
			continue
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, fmt.Errorf("kafkaio: listing transactions on broker %d: %w", sh.Meta.NodeID, err)
		}
		for _, ts := range resp.TransactionStates {
			if ts.ProducerID == id {
				out = append(out, ts.TransactionalID)
			}
		}
	}
	return out, nil
}

// End implements lag.TxnAborter (WriteTxnMarkers to the leader): the
// marker the transaction's coordinator should have written, a commit or an
// abort. The coordinator epoch is the last one the partition saw for the
// producer (0 if none), as kafka-transactions.sh abort sends.
func (a *TxnAborter) End(ctx context.Context, topic string, partition int32, p lag.Producer, commit bool) error {
	ctx, cancel := context.WithTimeout(ctx, a.Timeout)
	defer cancel()
	what := "abort"
	if commit {
		what = "commit"
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = p.ID, p.Epoch, commit
	m.CoordinatorEpoch = max(p.CoordinatorEpoch, 0)
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{partition}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	resp, err := req.RequestWith(ctx, a.cl)
	if err != nil {
		return fmt.Errorf("kafkaio: writing the %s marker of producer %d on %s[%d]: %w", what, p.ID, topic, partition, refusal(err))
	}
	for _, rm := range resp.Markers {
		for _, t := range rm.Topics {
			for _, rp := range t.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return fmt.Errorf("kafkaio: writing the %s marker of producer %d on %s[%d]: %w", what, p.ID, topic, partition, refusal(err))
				}
			}
		}
	}
	return nil
}

// refusal marks the authorization errors as lag.ErrAbortRefused.
func refusal(err error) error {
	if errors.Is(err, kerr.ClusterAuthorizationFailed) || errors.Is(err, kerr.TopicAuthorizationFailed) {
		return fmt.Errorf("%w (%w)", lag.ErrAbortRefused, err)
	}
	return err
}

// franzOptions translates s's librdkafka properties into franz-go's
// options, as far as the aborter needs: where, who, and how securely.
func franzOptions(s Settings) ([]kgo.Opt, error) {
	if s.Bootstrap == "" {
		return nil, fmt.Errorf("kafkaio: no bootstrap servers")
	}
	p := s.Properties
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(s.Bootstrap, ",")...), kgo.RequestRetries(2)}
	if s.ClientID != "" {
		opts = append(opts, kgo.ClientID(s.ClientID))
	}
	proto := strings.ToUpper(p["security.protocol"])
	switch proto {
	case "", "PLAINTEXT", "SASL_PLAINTEXT":
	case "SSL", "SASL_SSL":
		tc, err := franzTLS(p)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	default:
		return nil, fmt.Errorf("kafkaio: security.protocol %q is not one the transaction aborter speaks", p["security.protocol"])
	}
	if strings.HasPrefix(proto, "SASL_") {
		mech := cmp.Or(p["sasl.mechanisms"], p["sasl.mechanism"], "GSSAPI")
		user, pass := p["sasl.username"], p["sasl.password"]
		switch strings.ToUpper(mech) {
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
		default:
			return nil, fmt.Errorf("kafkaio: SASL mechanism %s is not one the transaction aborter speaks (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", mech)
		}
	}
	return opts, nil
}

// franzTLS is the TLS configuration librdkafka's ssl.* properties describe.
func franzTLS(p map[string]string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca := p["ssl.ca.location"]; ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("kafkaio: ssl.ca.location: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafkaio: ssl.ca.location %s holds no PEM certificate", ca)
		}
	}
	if cert, key := p["ssl.certificate.location"], p["ssl.key.location"]; cert != "" || key != "" {
		kp, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("kafkaio: ssl.certificate.location / ssl.key.location: %w", err)
		}
		tc.Certificates = []tls.Certificate{kp}
	}
	if strings.EqualFold(p["enable.ssl.certificate.verification"], "false") {
		tc.InsecureSkipVerify = true //nolint:gosec // the operator turned verification off for every client (librdkafka's property)
	} else if strings.EqualFold(p["ssl.endpoint.identification.algorithm"], "none") {
		// The chain is verified, the host name is not (librdkafka's "none").
		tc.InsecureSkipVerify = true //nolint:gosec // VerifyConnection below verifies the chain
		tc.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("kafkaio: the broker sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: tc.RootCAs, Intermediates: inter})
			return err
		}
	}
	return tc, nil
}
