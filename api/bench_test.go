package api_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/apitest"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// benchResults returns distinct results of one session, more than the
// store's capacity below, so that cycling through them never hits the
// redelivery check.
func benchResults(session string) []*schemas.IntentResult {
	rs := make([]*schemas.IntentResult, 4096)
	for i := range rs {
		rs[i] = result("bench-"+strconv.Itoa(i), "echo", session)
	}
	return rs
}

// BenchmarkResultsFanOut measures Results.Add delivering one result to N
// subscribers of its session.
//
//   - hub/N: the hub alone, with sinks that count (no sockets): the cost of
//     matching, encoding once and handing the message to N queues.
//   - websocket/N=100, 1000, 10000: end to end over real WebSocket
//     connections on loopback, Add to the clients having read every
//     message; Adds go in batches of 128 so no client's send queue
//     overflows. 10,000 connections need some 20,000 file descriptors: the
//     benchmark raises RLIMIT_NOFILE (past the hard limit when run as root),
//     and skips a size the limit cannot hold.
//
// deliveries/s is results × subscribers per second.
func BenchmarkResultsFanOut(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("hub/N=%d", n), func(b *testing.B) {
			r := api.NewResults(1024)
			var delivered int
			for range n {
				api.SubscribeSession(r, "s", func([]byte) { delivered++ })
			}
			rs := benchResults("s")
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				r.Add(rs[i%len(rs)])
				i++
			}
			if delivered != i*n {
				b.Fatalf("delivered %d, want %d", delivered, i*n)
			}
			b.ReportMetric(float64(delivered)/b.Elapsed().Seconds(), "deliveries/s")
		})
	}
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("websocket/N=%d", n), func(b *testing.B) { benchWebsocket(b, n) })
	}
}

func benchWebsocket(b *testing.B, n int) {
	const batch = 128
	if limit, err := raiseFDLimit(uint64(2*n + 256)); err != nil || limit < uint64(2*n+256) {
		b.Skipf("%d connections need %d file descriptors; RLIMIT_NOFILE is %d (%v)", n, 2*n+256, limit, err)
	}
	results := api.NewResults(1024)
	srv, err := api.New(api.Config{}, &apitest.Publisher{}, results,
		api.WithClock(clockwork.NewRealClock()), api.WithLogger(discardLogger()),
		api.WithRegisterer(prometheus.NewRegistry()))
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	var (
		total    atomic.Int64
		progress = make(chan struct{}, 1)
		readers  sync.WaitGroup
		conns    []*websocket.Conn
	)
	url := "ws" + strings.TrimPrefix(ts.URL, "http") + "/v1/stream"
	for range n {
		conn, _, err := websocket.DefaultDialer.Dial(url, nil)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, conn)
		if err := conn.WriteMessage(websocket.TextMessage, []byte(`{"subscribe":{"session_id":"s"}}`)); err != nil {
			b.Fatal(err)
		}
		if _, _, err := conn.ReadMessage(); err != nil { // the acknowledgement
			b.Fatal(err)
		}
		readers.Go(func() {
			for {
				if _, _, err := conn.ReadMessage(); err != nil {
					return
				}
				total.Add(1)
				select {
				case progress <- struct{}{}:
				default:
				}
			}
		})
	}
	waitFor := func(want int64) {
		timeout := time.NewTimer(testTimeout)
		defer timeout.Stop()
		for total.Load() < want {
			select {
			case <-progress:
			case <-timeout.C:
				b.Fatalf("delivered %d of %d", total.Load(), want)
			}
		}
	}
	rs := benchResults("s")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		results.Add(rs[i%len(rs)])
		i++
		if i%batch == 0 {
			waitFor(int64(i * n))
		}
	}
	waitFor(int64(i * n))
	b.ReportMetric(float64(total.Load())/b.Elapsed().Seconds(), "deliveries/s")
	b.StopTimer()

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	shutdownErr := make(chan error, 1)
	go func() { shutdownErr <- srv.Shutdown(ctx) }()
	readers.Wait() // each reader answers its close frame and ends
	if err := <-shutdownErr; err != nil {
		b.Errorf("Shutdown: %v", err)
	}
	for _, c := range conns {
		_ = c.Close()
	}
	ts.Close()
}
