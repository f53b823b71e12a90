package api

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxHTTPConnections is the default of Config.MaxHTTPConnections
// (http.max_connections): below serve's 20,000 descriptors, leaving 3,616
// for what else the process opens (the Kafka clients' sockets, pebble's
// files, the lookup store's connections, the log), so that a flood of
// connections is refused by the bound rather than by accept failing with
// EMFILE (which net/http meets by sleeping and retrying, and the
// process's other sockets by failing).
const DefaultMaxHTTPConnections = 16384

// ReasonConnections is the reason counted, in
// switchboard_api_admission_refused_total, for a connection the listener
// closed at once because it already held Config.MaxHTTPConnections.
const ReasonConnections = "connections"

// boundedListener holds at most max connections open at once: one more is
// accepted and closed at once, without a byte read or written, and
// counted; Accept never blocks on the bound. A connection counts until it
// is closed, also after a WebSocket upgrade hijacks it.
type boundedListener struct {
	net.Listener
	max     int64
	open    *atomic.Int64 // the connections open (the server's gauge reads it)
	refused prometheus.Counter
}

func newBoundedListener(ln net.Listener, maxConns int, open *atomic.Int64, refused prometheus.Counter) *boundedListener {
	return &boundedListener{Listener: ln, max: int64(maxConns), open: open, refused: refused}
}

// BoundListener returns ln holding at most maxConns connections open at
// once, as the API's own listeners do: one more is accepted and closed at
// once, unanswered, and counted in refused; Accept never waits on the
// bound. For the commands that serve their own metrics (context aggregate
// --metrics-listen), so that a flood on that port cannot take the
// descriptors the process's Kafka clients need.
func BoundListener(ln net.Listener, maxConns int, refused prometheus.Counter) net.Listener {
	return newBoundedListener(ln, maxConns, new(atomic.Int64), refused)
}

// newConnsGauge registers switchboard_api_connections, which reads open.
func newConnsGauge(open *atomic.Int64, reg prometheus.Registerer) error {
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchboard_api_connections",
		Help: "Connections open on the API's listener, every route's (bounded by http.max_connections; 0 when the handler is mounted on another server).",
	}, func() float64 { return float64(open.Load()) })
	if err := reg.Register(g); err != nil {
		return fmt.Errorf("api: register connection metrics: %w", err)
	}
	return nil
}

func (l *boundedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			_ = c.Close()
			l.refused.Inc()
			continue
		}
		return &boundedConn{Conn: c, l: l}, nil
	}
}

// boundedConn is a connection the listener counts until it is closed. It
// passes through what net/http and the stream use of a *net.TCPConn:
// CloseWrite (an answer with Connection: close reaches the client before
// the close) and SyscallConn (the stream's non-blocking writes).
type boundedConn struct {
	net.Conn
	l    *boundedListener
	once sync.Once
}

func (c *boundedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}

func (c *boundedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *boundedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errNoSyscallConn
}
