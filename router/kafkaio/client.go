package kafkaio

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Every client kafkaio makes hands its librdkafka log lines to a watch
// instead of printing them on stderr: the watch passes them on to
// Settings.Logger, except those that report the brokers refusing the
// client (its SASL credentials, or a broker certificate it does not
// trust), which it keeps, so that the operation waiting on the client ends
// with one line saying so (a *RefusedError) instead of a timeout after a
// screenful of librdkafka's retries.

// watch reads one client's log lines until the client closes.
type watch struct {
	s    Settings
	log  *slog.Logger
	done chan struct{} // closed once the client's log channel is closed

	mu      sync.Mutex
	err     *RefusedError // the last refusal, until the client is accepted
	refused chan struct{} // closed while err is set
}

func newWatch(s Settings, logs chan kafka.LogEvent) *watch {
	w := &watch{s: s, log: s.Logger, done: make(chan struct{}), refused: make(chan struct{})}
	if w.log == nil {
		w.log = slog.Default()
	}
	go w.read(logs)
	return w
}

// read passes the log lines on, keeping refusals, until logs is closed
// (librdkafka's Go wrapper closes it when the client closes).
func (w *watch) read(logs chan kafka.LogEvent) {
	defer close(w.done)
	for ev := range logs {
		if ev.Level <= 4 {
			if r := w.s.refusalIn(ev.Message); r != nil {
				w.set(r)
				continue
			}
		}
		msg := ev.Message
		if i := strings.Index(msg, "]: "); strings.HasPrefix(msg, "[thrd:") && i > 0 {
			msg = msg[i+3:]
		}
		w.log.Log(context.Background(), logLevel(ev.Level), "kafka client", "client", ev.Name, "tag", ev.Tag, "message", msg)
	}
}

// logLevel maps librdkafka's syslog levels: a failed broker connection
// (3, err) is a warning, the client retries it.
func logLevel(l int) slog.Level {
	switch {
	case l <= 4:
		return slog.LevelWarn
	case l <= 6:
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

func (w *watch) set(r *RefusedError) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		close(w.refused)
	}
	w.err = r
}

// accepted forgets the refusal: the client got an answer since.
func (w *watch) accepted() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		w.err = nil
		w.refused = make(chan struct{})
	}
}

// refusal returns the last refusal, or nil.
func (w *watch) refusal() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		return nil
	}
	return w.err
}

// refusedC is closed while the client is refused.
func (w *watch) refusedC() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.refused
}

// bound returns ctx, cancelled as well when the client is refused: an admin
// request or a metadata wait that would otherwise run to its timeout.
func (w *watch) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	refused := w.refusedC()
	go func() {
		select {
		case <-refused:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// withLogs asks librdkafka for the log channel.
func withLogs(cm *kafka.ConfigMap) { (*cm)["go.logs.channel.enable"] = true }

// newProducer creates a producer whose log lines a watch reads; what names
// it in the error.
func newProducer(s Settings, what string, owned kafka.ConfigMap) (*kafka.Producer, *watch, error) {
	cm, err := s.configMapFor("producer", owned)
	if err != nil {
		return nil, nil, err
	}
	withLogs(cm)
	withSmallChannels(cm)
	p, err := kafka.NewProducer(cm)
	if err != nil {
		return nil, nil, fmt.Errorf("kafkaio: creating the %s: %w", what, err)
	}
	return p, newWatch(s, p.Logs()), nil
}

// consumer is a librdkafka consumer and the watch of its log lines.
type consumer struct {
	*kafka.Consumer
	w     *watch
	group string // the group it joins; "" for a reader (assigned partitions)
}

// denial returns the error that ends a read on e: the client refused (its
// credentials, its certificate), or its principal denied Read on one of
// topics or on its group; nil for anything else. A reader is told that its
// group is denied too (librdkafka looks for its coordinator although it never
// joins): it needs no group, so that is nothing.
func (c *consumer) denial(e kafka.Error, topics []string) error {
	s := c.w.s
	switch e.Code() {
	case kafka.ErrTopicAuthorizationFailed:
		named := strings.Join(topics, ", ")
		for _, t := range topics {
			if strings.Contains(e.Error(), t) {
				named = t
				break
			}
		}
		return s.refusal(e, "Read", "topic "+named)
	case kafka.ErrGroupAuthorizationFailed:
		if c.group == "" {
			return nil
		}
		return s.refusal(e, "Read", "group "+c.group)
	case kafka.ErrAuthentication, kafka.ErrSaslAuthenticationFailed, kafka.ErrSsl:
		if r := s.refusalIn(e.Error()); r != nil {
			r.Err = e
			return r
		}
	}
	return nil
}

// Close closes the consumer and waits for its log lines to be read.
func (c *consumer) Close() error {
	err := c.Consumer.Close()
	<-c.w.done
	return err
}

// newConsumer creates a consumer with the pass-through consumer properties
// and the caller's owned settings; what names it in the error ("consumer",
// "restore consumer").
func newConsumer(s Settings, what string, owned kafka.ConfigMap) (*consumer, error) {
	cm, err := s.configMapFor("consumer", owned)
	if err != nil {
		return nil, err
	}
	withLogs(cm)
	c, err := kafka.NewConsumer(cm)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: creating the %s: %w", what, err)
	}
	return &consumer{Consumer: c, w: newWatch(s, c.Logs())}, nil
}

// metadata asks for the metadata of topic (nil: every topic) within
// timeout, ending early when the brokers refuse the client.
func (c *consumer) metadata(topic *string, timeout time.Duration) (*kafka.Metadata, error) {
	return metadataWithin(nil, c.GetMetadata, c.w, topic, retryClock.Now().Add(timeout))
}

// metadataWithin asks get for metadata in short tries until deadline, so
// that a refusal, or done closing (a Ctrl-C while no broker answers), ends
// the wait within a second.
func metadataWithin(done <-chan struct{}, get func(*string, bool, int) (*kafka.Metadata, error), w *watch, topic *string, deadline time.Time) (*kafka.Metadata, error) {
	for {
		select {
		case <-done:
			return nil, context.Canceled
		default:
		}
		md, err := get(topic, topic == nil, 1000)
		if err == nil {
			w.accepted()
			return md, nil
		}
		if r := w.refusal(); r != nil {
			return nil, r
		}
		if !retryClock.Now().Before(deadline) {
			return nil, w.s.refusal(err, "Describe", topicOrAll(topic))
		}
	}
}

func topicOrAll(topic *string) string {
	if topic == nil {
		return "the topics"
	}
	return "topic " + *topic
}

// admin is an admin client made from a producer, whose log lines and
// error events a watch reads (librdkafka's admin client alone has neither).
type admin struct {
	*kafka.AdminClient
	p  *kafka.Producer
	w  *watch
	wg sync.WaitGroup
}

func newAdmin(s Settings) (*admin, error) {
	cm, err := s.adminConfigMap()
	if err != nil {
		return nil, err
	}
	withLogs(cm)
	withSmallChannels(cm)
	p, err := kafka.NewProducer(cm)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: creating the admin client: %w", err)
	}
	w := newWatch(s, p.Logs())
	a, err := kafka.NewAdminClientFromProducer(p)
	if err != nil {
		p.Close()
		<-w.done
		return nil, fmt.Errorf("kafkaio: creating the admin client: %w", err)
	}
	k := &admin{AdminClient: a, p: p, w: w}
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		for ev := range p.Events() {
			if e, ok := ev.(kafka.Error); ok {
				if r := s.refusalIn(e.Error()); r != nil {
					w.set(r)
				}
			}
		}
	}()
	return k, nil
}

// Close closes the admin client and its producer.
func (a *admin) Close() {
	a.AdminClient.Close()
	a.p.Close()
	a.wg.Wait()
	<-a.w.done
}

// refusalOr returns the client's refusal, if it was refused, else err: an
// admin request that ended because its context did, on a refusal.
func (a *admin) refusalOr(err error) error {
	if r := a.w.refusal(); r != nil {
		return r
	}
	return err
}

// metadata reads the cluster's metadata (topic nil: every topic), ending
// early when the brokers refuse the client.
func (a *admin) metadata(ctx context.Context, topic *string) (*kafka.Metadata, error) {
	deadline := retryClock.Now().Add(15 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	return metadataWithin(ctx.Done(), a.GetMetadata, a.w, topic, deadline)
}
