package api_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/api/apitest"
)

// BenchmarkSubmitUnderSlowBodies measures a normal client's POST
// /v1/intents (sequential, keep-alive, API key) against a server that Run
// serves on loopback while `slow` other connections each declare a body of
// 100 KB and send it a byte a second: half of them with a valid API key,
// half with none (the slow-loris attack of finding 6, issue 13). One op is
// one POST, its answer read.
//
// Reported: p50-µs and p99-µs of the normal client's requests, and
// held-conns: how many slow connections the server still held (neither
// answered nor closed) when the normal client was done. Target: the p99
// with 500 slow connections within the p99 without them; every
// credential-less connection answered at once (held-conns at most the
// credentialed half until body_read_timeout, default 30 s, cuts those).
//
// It depends on nothing of this package's tests but apitest, so that it
// can be dropped into an older tree to compare.
func BenchmarkSubmitUnderSlowBodies(b *testing.B) {
	const key = "sk_bench_0123456789abcdef"
	for _, slow := range []int{0, 500} {
		b.Run(fmt.Sprintf("slow=%d", slow), func(b *testing.B) {
			reg := prometheus.NewRegistry()
			cfg := api.Config{Listen: "127.0.0.1:0", Auth: api.AuthConfig{
				Required: true,
				APIKeys:  []api.Key{{Name: "bench", Tenant: "bench", SHA256: sha256.Sum256([]byte(key))}},
			}}
			srv, err := api.New(cfg, &apitest.Publisher{}, api.NewResults(0),
				api.WithLogger(slog.New(slog.DiscardHandler)), api.WithRegisterer(reg), api.WithGatherer(reg))
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() { errc <- srv.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-errc; err != nil {
					b.Log(err)
				}
			}()
			select {
			case <-srv.Ready():
			case err := <-errc:
				b.Fatal(err)
			}
			addr := srv.Addr()

			conns := make([]net.Conn, 0, slow)
			for i := range slow {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					b.Fatalf("slow connection %d: %v", i, err)
				}
				defer func() { _ = c.Close() }()
				auth := ""
				if i%2 == 0 {
					auth = "Authorization: Bearer " + key + "\r\n"
				}
				if _, err := io.WriteString(c, "POST /v1/intents HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"+
					auth+"Content-Length: 100000\r\n\r\n{"); err != nil {
					b.Fatal(err)
				}
				conns = append(conns, c)
			}
			stop := make(chan struct{})
			var drip sync.WaitGroup
			drip.Go(func() { // a byte a second on every slow connection
				t := time.NewTicker(time.Second)
				defer t.Stop()
				for {
					select {
					case <-stop:
						return
					case <-t.C:
						for _, c := range conns {
							_, _ = c.Write([]byte(" "))
						}
					}
				}
			})

			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			body := `{"intent_type":"echo","payload":{"n":1}}`
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/intents", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				start := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				lat = append(lat, time.Since(start))
				if resp.StatusCode != http.StatusAccepted {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
			b.StopTimer()
			close(stop)
			drip.Wait()

			held := 0
			for _, c := range conns { // answered or closed: a byte or EOF comes at once
				_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
				if _, err := c.Read(make([]byte, 1)); err != nil && isTimeout(err) {
					held++
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(held), "held-conns")
		})
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error) //nolint:errorlint // net.Conn.Read returns the net.Error itself
	return ok && ne.Timeout()
}
