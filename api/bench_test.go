package api_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
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
//     benchmark raises RLIMIT_NOFILE (past the hard limit when it may), and
//     when one process still cannot hold both ends it runs the clients in a
//     child process (TestBenchClientProcess) that reports what they read.
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
	// Client and server sockets in one process need 2n descriptors; when
	// the limit cannot hold them, the clients run in a child process.
	need := uint64(2*n + 256)
	limit, err := raiseFDLimit(need)
	inProcess := err == nil && limit >= need
	if !inProcess && (err != nil || limit < uint64(n+256)) {
		b.Skipf("%d connections need %d file descriptors; RLIMIT_NOFILE is %d (%v)", n, n+256, limit, err)
	}
	results := api.NewResults(1024)
	srv, err := api.New(api.Config{}, &apitest.Publisher{}, results,
		api.WithClock(clockwork.NewRealClock()), api.WithLogger(discardLogger()),
		api.WithRegisterer(prometheus.NewRegistry()))
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	url := "ws" + strings.TrimPrefix(ts.URL, "http") + "/v1/stream"
	var clients *benchClients
	if inProcess {
		clients = dialBenchClients(b, url, n)
	} else {
		clients = spawnBenchClients(b, url, n)
	}
	waitFor := func(want int64) {
		timeout := time.NewTimer(testTimeout)
		defer timeout.Stop()
		for clients.total.Load() < want {
			select {
			case <-clients.progress:
			case <-timeout.C:
				b.Fatalf("delivered %d of %d", clients.total.Load(), want)
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
	b.ReportMetric(float64(clients.total.Load())/b.Elapsed().Seconds(), "deliveries/s")
	b.StopTimer()

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	shutdownErr := make(chan error, 1)
	go func() { shutdownErr <- srv.Shutdown(ctx) }()
	clients.close() // each client answers its close frame and ends
	if err := <-shutdownErr; err != nil {
		b.Errorf("Shutdown: %v", err)
	}
	ts.Close()
}

// benchClients are n WebSocket clients subscribed to session "s", counting
// the messages they read.
type benchClients struct {
	total    atomic.Int64
	progress chan struct{} // buffered 1: total grew
	close    func()        // waits for the clients to see the server close
}

func (c *benchClients) add(n int64) {
	c.total.Add(n)
	select {
	case c.progress <- struct{}{}:
	default:
	}
}

// dialBenchClients dials n clients in this process.
func dialBenchClients(tb testing.TB, url string, n int) *benchClients {
	c := &benchClients{progress: make(chan struct{}, 1)}
	var readers sync.WaitGroup
	conns := make([]*websocket.Conn, 0, n)
	for range n {
		conn, _, err := websocket.DefaultDialer.Dial(url, nil)
		if err != nil {
			tb.Fatal(err)
		}
		conns = append(conns, conn)
		if err := conn.WriteMessage(websocket.TextMessage, []byte(`{"subscribe":{"session_id":"s"}}`)); err != nil {
			tb.Fatal(err)
		}
		if _, _, err := conn.ReadMessage(); err != nil { // the acknowledgement
			tb.Fatal(err)
		}
		readers.Go(func() {
			for {
				if _, _, err := conn.ReadMessage(); err != nil {
					return
				}
				c.add(1)
			}
		})
	}
	c.close = func() {
		readers.Wait()
		for _, conn := range conns {
			_ = conn.Close()
		}
	}
	return c
}

// benchClientsEnv tells the test binary, started again as a child process,
// to be n benchmark clients of a URL ("url n").
const benchClientsEnv = "SWITCHBOARD_BENCH_WS_CLIENTS"

// spawnBenchClients runs n clients in a child process (this test binary,
// running TestBenchClientProcess), which reports its running total on
// stdout, one number a line.
func spawnBenchClients(tb testing.TB, url string, n int) *benchClients {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchClientProcess$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d", benchClientsEnv, url, n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	c := &benchClients{progress: make(chan struct{}, 1)}
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
				continue
			}
			if v, err := strconv.ParseInt(sc.Text(), 10, 64); err == nil {
				c.add(v - c.total.Load())
			}
		}
	}()
	select {
	case <-ready:
	case <-done:
		_ = cmd.Wait()
		tb.Fatal("the client process ended before its clients were ready")
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		tb.Fatal("the client process did not get ready within a minute")
	}
	c.close = func() {
		_ = stdin.Close() // the child closes its connections and exits
		<-done
		_ = cmd.Wait()
	}
	return c
}

// TestBenchClientProcess is the child process of spawnBenchClients; run
// directly, it does nothing.
func TestBenchClientProcess(t *testing.T) {
	spec := os.Getenv(benchClientsEnv)
	if spec == "" {
		t.Skip("only run as the client process of BenchmarkResultsFanOut")
	}
	url, count, _ := strings.Cut(spec, " ")
	n, err := strconv.Atoi(count)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raiseFDLimit(uint64(n + 256)); err != nil {
		t.Fatal(err)
	}
	c := dialBenchClients(t, url, n)
	out := bufio.NewWriter(os.Stdout)
	_, _ = out.WriteString("ready\n")
	_ = out.Flush()
	stop := make(chan struct{})
	go func() { // the parent closes stdin when it is done
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	var last int64 = -1
	for {
		select {
		case <-c.progress:
			if v := c.total.Load(); v != last {
				last = v
				_, _ = fmt.Fprintln(out, v)
				_ = out.Flush()
			}
		case <-stop:
			c.close()
			os.Exit(0) // not through TestMain: the readers' goroutines are gone, the stdin reader is not
		}
	}
}
