// Package embedded runs an in-process Kafka-protocol broker (franz-go's kfake)
// and an in-process Confluent Schema Registry (srfake) on loopback, for
// 'switchboard dev' and for fast tests. Any client reaches them over the real
// protocols: librdkafka, kcat, Java, Python.
//
// It is not Apache Kafka: tests that matter run against a real broker too
// (make test-integration). It keeps everything in memory and is gone when the
// process ends.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// Options says where to listen. Port 0 picks a free port.
type Options struct {
	// KafkaPort is the broker's port on 127.0.0.1 (9092 for dev, 0 in tests).
	KafkaPort int
	// Registry starts a Schema Registry too.
	Registry bool
	// RegistryAddr is the registry's listen address ("127.0.0.1:8081" for
	// dev; default 127.0.0.1:0).
	RegistryAddr string
}

// Cluster is a running embedded broker and, optionally, registry.
type Cluster struct {
	kafka *kfake.Cluster
	reg   *srfake.Registry
	srv   *http.Server
	ln    net.Listener
	done  chan struct{}
}

// Start starts the broker (and the registry when asked).
func Start(opts Options) (*Cluster, error) {
	kopts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(opts.KafkaPort), kfake.ClusterID("switchboard-dev")}
	kc, err := kfake.NewCluster(kopts...)
	if err != nil {
		return nil, fmt.Errorf("%w on 127.0.0.1:%d: %w", ErrBrokerListen, opts.KafkaPort, err)
	}
	c := &Cluster{kafka: kc, done: make(chan struct{})}
	if !opts.Registry {
		close(c.done)
		return c, nil
	}
	addr := opts.RegistryAddr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	c.ln, err = net.Listen("tcp", addr)
	if err != nil {
		kc.Close()
		return nil, fmt.Errorf("%w on %s: %w", ErrRegistryListen, addr, err)
	}
	c.reg = srfake.NewRegistry()
	c.srv = &http.Server{Handler: c.reg.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(c.done)
		if err := c.srv.Serve(c.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // Serve only fails when the listener does; Close reports nothing useful
		}
	}()
	return c, nil
}

// Bootstrap is the broker's host:port.
func (c *Cluster) Bootstrap() string { return c.kafka.ListenAddrs()[0] }

// RegistryURL is the registry's URL, or "" without one.
func (c *Cluster) RegistryURL() string {
	if c.ln == nil {
		return ""
	}
	return "http://" + c.ln.Addr().String()
}

// KafkaPort is the broker's port.
func (c *Cluster) KafkaPort() int {
	_, p, _ := net.SplitHostPort(c.Bootstrap())
	n, _ := strconv.Atoi(p)
	return n
}

// HoldProduce makes the broker hold its answer to every produce request
// that writes to topic until release is called (or the cluster closes), as a
// slow broker would: for tests of what waits for an acknowledgement. The
// held client's other requests on that connection wait too.
func (c *Cluster) HoldProduce(topic string) (release func()) {
	gate := make(chan struct{})
	c.kafka.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.kafka.KeepControl()
		if pr, ok := req.(*kmsg.ProduceRequest); ok {
			for _, t := range pr.Topics {
				if t.Topic == topic {
					c.kafka.SleepControl(func() { <-gate })
					break
				}
			}
		}
		return nil, nil, false // then handled as usual
	})
	var once sync.Once
	return func() { once.Do(func() { close(gate) }) }
}

// HoldOffsetCommits makes the broker hold its answer to every offset commit
// until release is called (or the cluster closes), as a coordinator that is
// gone would leave a client waiting: for tests of what must not wait for a
// commit. held gets a value (without blocking) each time a commit is held.
// The held client's other requests on that connection (to the group
// coordinator: heartbeats) wait too.
func (c *Cluster) HoldOffsetCommits() (held <-chan struct{}, release func()) {
	gate := make(chan struct{})
	seen := make(chan struct{}, 1)
	c.kafka.ControlKey(int16(kmsg.OffsetCommit), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.kafka.KeepControl()
		select {
		case seen <- struct{}{}:
		default:
		}
		c.kafka.SleepControl(func() { <-gate })
		return nil, nil, false // then handled as usual
	})
	var once sync.Once
	return seen, func() { once.Do(func() { close(gate) }) }
}

// Close stops the registry and the broker.
func (c *Cluster) Close() {
	if c.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = c.srv.Shutdown(ctx)
		cancel()
	}
	<-c.done
	c.kafka.Close()
}
